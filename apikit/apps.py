from django.apps import AppConfig


class ApiKitConfig(AppConfig):
    name = "apikit"
    verbose_name = "API kit"

    def ready(self) -> None:
        from .sharing import share_response_wrappers

        share_response_wrappers()
