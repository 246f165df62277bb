import json
import logging

from django.apps import AppConfig
from django.conf import settings

logger = logging.getLogger("accounts.sso")


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        # config/settings.py left these out of OIDC_ROLE_MAP: said once at every process's start.
        for group, value in getattr(settings, "OIDC_ROLE_MAP_IGNORED", {}).items():
            logger.warning(
                "OIDC_ROLE_MAP maps %r to %s, which is not managers, operators or auditors: that entry is ignored.",
                group,
                json.dumps(value),
            )
