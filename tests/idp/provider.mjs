// A real OpenID Connect provider (oidc-provider) for canon's sign-in tests, on a free 127.0.0.1 port.
//
// Started by tests/idp/__init__.py with Node 22: it prints one line, `listening <issuer URL>`, once it serves.
// Configured from the environment:
//   IDP_CLIENT    JSON: the client canon signs in as ({client_id, client_secret, redirect_uris,
//                 post_logout_redirect_uris})
//   IDP_ACCOUNTS  JSON: account id -> {groups: [...], roles: [...]} (any password signs in, the dev login form)
//   IDP_RESOURCE  canon's resource URL: access tokens are JWTs for it, carrying the account's groups and roles
//   IDP_ID_TOKEN_TTL  seconds an ID token lasts (default 3600)
// The login and consent pages are oidc-provider's own development interactions (a login form, a consent button).
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import * as jose from 'jose';
import Provider from 'oidc-provider';

const client = JSON.parse(process.env.IDP_CLIENT);
const accounts = JSON.parse(process.env.IDP_ACCOUNTS ?? '{}');
const resource = process.env.IDP_RESOURCE;
const idTokenTtl = Number(process.env.IDP_ID_TOKEN_TTL ?? 3600);
const canonScopes = 'canon:read canon:write canon:admin';

const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
const jwk = { ...(await jose.exportJWK(privateKey)), kid: 'idp-key-1', alg: 'RS256', use: 'sig' };

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    token_endpoint_auth_method: 'client_secret_basic',
    grant_types: ['authorization_code'],
    response_types: ['code'],
    ...client,
  }],
  jwks: { keys: [jwk] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  claims: { openid: ['sub', 'groups', 'roles'] },
  conformIdTokenClaims: false, // the ID token carries the claims of its scopes (groups, roles), as canon's mappers do
  ttl: { IdToken: idTokenTtl },
  async findAccount(ctx, id) {
    const account = accounts[id];
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, groups: account.groups ?? [], roles: account.roles ?? [] };
      },
    };
  },
  async extraTokenClaims(ctx, token) {
    const account = accounts[token.accountId];
    return token.kind === 'AccessToken' && account ? { groups: account.groups ?? [], roles: account.roles ?? [] }
      : undefined;
  },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== resource) throw new Error(`unknown resource ${indicator}`);
        return { scope: canonScopes, audience: resource, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } };
      },
    },
  },
});
provider.on('server_error', (ctx, error) => console.error('idp server_error', error));
server.on('request', provider.callback());
console.log(`listening ${issuer}`);

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
