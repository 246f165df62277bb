// A real OpenID Connect provider (node-oidc-provider) for keel's single sign-on tests
// (tests/scenarios/test_sso.py, driven by tests/support/oidc_provider/__init__.py).
//
// Everything comes from the environment:
//   PROVIDER_ISSUER         the issuer (the tests put a tampering proxy's address here)
//   PROVIDER_PORT           the port it listens on, on 127.0.0.1
//   PROVIDER_CLIENT_ID, PROVIDER_CLIENT_SECRET, PROVIDER_REDIRECT_URIS (comma-separated)
//                           its one client: confidential, authorization code flow
//   PROVIDER_JWKS           the signing keys, a private JWKS as JSON (the test made it, so the
//                           test can sign tokens as this provider would)
//   PROVIDER_ACCOUNTS       a JSON file {"<subject>": {claims}} read again at every lookup, so a
//                           test changes a person's groups between two sign-ins
// The login and consent pages are the library's development interactions: any password.
import { readFileSync } from 'node:fs';

import Provider from 'oidc-provider';

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    console.error(`provider.mjs: ${name} is not set`);
    process.exit(2);
  }
  return value;
};

const accountsFile = env('PROVIDER_ACCOUNTS');

const provider = new Provider(env('PROVIDER_ISSUER'), {
  clients: [
    {
      client_id: env('PROVIDER_CLIENT_ID'),
      client_secret: env('PROVIDER_CLIENT_SECRET'),
      redirect_uris: env('PROVIDER_REDIRECT_URIS').split(','),
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'RS256',
    },
  ],
  jwks: JSON.parse(env('PROVIDER_JWKS')),
  claims: {
    openid: ['sub'],
    profile: ['preferred_username', 'name'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  async findAccount(ctx, id) {
    const accounts = JSON.parse(readFileSync(accountsFile, 'utf8'));
    if (!Object.hasOwn(accounts, id)) return undefined;
    return {
      accountId: id,
      async claims() {
        return { ...accounts[id], sub: id };
      },
    };
  },
  features: { devInteractions: { enabled: true } },
  cookies: { keys: [env('PROVIDER_CLIENT_SECRET')] },
  // An error as one line of text, for the test's failure report.
  renderError(ctx, out) {
    ctx.type = 'text/plain';
    ctx.body = `provider error: ${JSON.stringify(out)}`;
  },
});

provider.on('server_error', (ctx, error) => console.error('server_error', error));
provider.listen(Number(env('PROVIDER_PORT')), '127.0.0.1', () => {
  console.log(`provider listening on ${env('PROVIDER_PORT')} as ${env('PROVIDER_ISSUER')}`);
});
