from django.apps import AppConfig


class SandboxConfig(AppConfig):
    """Registers the sandbox only so ``manage.py runsandbox`` is available."""

    name = "sandbox"
    verbose_name = "Sandbox external services"
    default_auto_field = "django.db.models.BigAutoField"
