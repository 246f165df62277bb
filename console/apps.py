from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The dashboard's execution screens: the list, the execution page and the operator's
    forms. Above both the runtime and approvals (it shows them together); neither
    imports it."""

    name = "console"
    verbose_name = "Console"
