"""Try single sign-on on this machine, with the OpenID provider keel's tests run.

    .venv/bin/python scripts/try_sso.py [--port 8490] [--keel http://127.0.0.1:8000]

starts node-oidc-provider (``tests/support/oidc_provider``, installed by ``make
install-test``) on 127.0.0.1:PORT with one client for the keel at ``--keel`` and two people:
``alice`` in the provider's groups ``keel-approvers`` and ``fulfilment``, ``bob`` in
``keel-ops``. It prints the environment to start keel with (docs/operations.md, "Single
sign-on"), then runs until Ctrl-C. Its login page takes any password. Change someone's
groups in the accounts file it names while it runs: the next sign-in follows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.oidc_provider import HERE, Accounts, signing_key  # noqa: E402

PEOPLE = {
    "alice": {"preferred_username": "alice", "email": "alice@example.com", "groups": ["keel-approvers", "fulfilment"]},
    "bob": {"preferred_username": "bob", "email": "bob@example.com", "groups": ["keel-ops"]},
}
ROLE_MAP = {"keel-approvers": "managers", "keel-ops": "operators"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8490)
    parser.add_argument("--keel", default="http://127.0.0.1:8000", help="the dashboard's address")
    args = parser.parse_args()
    node = shutil.which("node")
    if node is None or not (HERE / "node_modules" / "oidc-provider").is_dir():
        print("try_sso: needs node and the provider's packages: make install-test", file=sys.stderr)
        return 2
    here = Path(tempfile.mkdtemp(prefix="keel-sso-"))
    accounts = Accounts(here / "accounts.json")
    for subject, claims in PEOPLE.items():
        accounts.set(subject, **claims)
    issuer, secret = f"http://127.0.0.1:{args.port}", "try-sso-secret"
    env = {
        "PATH": f"{Path(node).parent}:/usr/bin:/bin",
        "PROVIDER_ISSUER": issuer,
        "PROVIDER_PORT": str(args.port),
        "PROVIDER_CLIENT_ID": "keel",
        "PROVIDER_CLIENT_SECRET": secret,
        "PROVIDER_REDIRECT_URIS": f"{args.keel.rstrip('/')}/oidc/callback/",
        "PROVIDER_JWKS": signing_key().jwks,
        "PROVIDER_ACCOUNTS": str(accounts.path),
    }
    print(f"The provider: {issuer} (any password); its people: {accounts.path}")
    print("Start keel with:\n")
    print(
        f"  OIDC_ISSUER={issuer} OIDC_CLIENT_ID=keel OIDC_CLIENT_SECRET={secret} "
        f"OIDC_SCOPES='openid email profile groups' OIDC_ROLE_MAP='{json.dumps(ROLE_MAP)}' make run\n"
    )
    try:
        return subprocess.run([node, str(HERE / "provider.mjs")], env=env, check=False).returncode
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
