// A real MCP client (the official TypeScript SDK 1.x, protocol 2025-11-25) run against canon by
// tests/clients/test_ts_sdk.py. It prints one JSON object per line on stdout:
//
//   {"step": NAME, "ok": true, "result": ...}        a request and what came back
//   {"step": NAME, "ok": false, "error": {code, message}}
//   {"notification": {"method": ..., "params": ...}} every notification from the server, as it arrives
//   {"event": "subscribed" | "unsubscribed" | "done", ...}
//
// The subscription part is a conversation with the test, which commits to the store when it reads
// an event: after "subscribed" it changes node A; the script waits for A's update, unsubscribes A
// and prints "unsubscribed"; the test then changes A and then B; the script waits for B's update
// and prints "done". Every wait is bounded, and the whole run is bounded by TS_CLIENT_TIMEOUT_MS.
//
// Usage: node ts_client.mjs stdio COMMAND [ARG...]   (spawned in this process's cwd, with its env)
//        node ts_client.mjs http URL

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const NODE_A = "canon://nodes/Team/team-payments";
const NODE_B = "canon://nodes/Team/team-billing";
const TEMPLATE = "canon://nodes/{type}/{id}";
const TIMEOUT_MS = Number(process.env.TS_CLIENT_TIMEOUT_MS ?? 60000);
const WAIT_MS = Number(process.env.TS_CLIENT_WAIT_MS ?? 15000);

const emit = (line) => process.stdout.write(JSON.stringify(line) + "\n");

setTimeout(() => {
  emit({ event: "timeout", after_ms: TIMEOUT_MS });
  process.exit(3);
}, TIMEOUT_MS).unref();

function transportFor(kind, target) {
  if (kind === "stdio" && target.length >= 1) {
    const [command, ...args] = target;
    return new StdioClientTransport({ command, args, env: { ...process.env }, cwd: process.cwd(), stderr: "inherit" });
  }
  if (kind === "http" && target.length === 1) {
    return new StreamableHTTPClientTransport(new URL(target[0]));
  }
  console.error("usage: ts_client.mjs stdio COMMAND [ARG...] | ts_client.mjs http URL");
  process.exit(2);
}

// The SDK does not expose the negotiated protocol version on every transport: read it off the wire.
function tapInitialize(transport, onResult) {
  const start = transport.start.bind(transport);
  transport.start = async () => {
    const inner = transport.onmessage;
    transport.onmessage = (message, extra) => {
      if (message.result && typeof message.result.protocolVersion === "string") onResult(message.result);
      inner?.(message, extra);
    };
    return start();
  };
}

async function step(name, call) {
  try {
    const result = await call();
    emit({ step: name, ok: true, result });
    return result;
  } catch (error) {
    emit({ step: name, ok: false, error: { code: error?.code ?? null, message: String(error?.message ?? error) } });
    return undefined;
  }
}

// Notifications, and bounded waits for a resources/updated of one URI.
const updated = [];
const waiters = [];
function onNotification(notification) {
  emit({ notification: { method: notification.method, params: notification.params ?? null } });
  if (notification.method === "notifications/resources/updated") {
    updated.push(notification.params.uri);
    for (const w of [...waiters]) if (w.uri === notification.params.uri) w.resolve();
  }
}
function updateOf(uri) {
  const seen = updated.length;
  return () =>
    new Promise((resolve, reject) => {
      if (updated.slice(seen).includes(uri)) return resolve(uri);
      const waiter = { uri, resolve: () => { clearTimeout(timer); resolve(uri); } };
      const timer = setTimeout(() => reject(new Error(`no notifications/resources/updated for ${uri} within ${WAIT_MS} ms`)), WAIT_MS);
      waiters.push(waiter);
    });
}

const [kind, ...target] = process.argv.slice(2);
const transport = transportFor(kind, target);
let initializeResult = null;
tapInitialize(transport, (result) => (initializeResult = result));

const client = new Client({ name: "canon-ts-client-test", version: "1.0.0" }, { capabilities: {} });
client.fallbackNotificationHandler = async (notification) => onNotification(notification);

await step("initialize", async () => {
  await client.connect(transport);
  return {
    protocolVersion: initializeResult?.protocolVersion ?? null,
    serverInfo: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
  };
});
await step("tools/list", () => client.listTools());
await step("tools/call get_node", () => client.callTool({ name: "get_node", arguments: { id: "team-payments" } }));
await step("tools/call unknown tool", () => client.callTool({ name: "no_such_tool", arguments: {} }));
await step("resources/list", () => client.listResources());
await step("resources/read", () => client.readResource({ uri: NODE_A }));
await step("resources/templates/list", () => client.listResourceTemplates());
await step("completion/complete id", () =>
  client.complete({
    ref: { type: "ref/resource", uri: TEMPLATE },
    argument: { name: "id", value: "team-pay" },
    context: { arguments: { type: "Team" } },
  }),
);
await step("completion/complete unknown prompt", () =>
  client.complete({ ref: { type: "ref/prompt", name: "no_such_prompt" }, argument: { name: "x", value: "" } }),
);

// Subscribe to A and B; the test changes A.
await step("resources/subscribe A", () => client.subscribeResource({ uri: NODE_A }));
await step("resources/subscribe B", () => client.subscribeResource({ uri: NODE_B }));
const updateOfA = updateOf(NODE_A);
emit({ event: "subscribed", uris: [NODE_A, NODE_B] });
const heardA = await step("wait for update of A", updateOfA);

// Unsubscribe A (B stays subscribed); the test changes A, then B.
await step("resources/unsubscribe A", () => client.unsubscribeResource({ uri: NODE_A }));
const updateOfB = updateOf(NODE_B);
emit({ event: "unsubscribed", uris: [NODE_A] });
const heardB = await step("wait for update of B", updateOfB);

if (kind === "http") await step("terminate session", () => transport.terminateSession());
await client.close();
emit({ event: "done" });
process.exit(heardA && heardB ? 0 : 1);
