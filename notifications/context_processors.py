from django.conf import settings


def mail(request) -> dict:
    """``mail_to_files``: where the embedded default writes mail, for the admin to see (or "")."""
    user = getattr(request, "user", None)
    files = settings.EMAIL_BACKEND.endswith("filebased.EmailBackend")
    admin = bool(user is not None and user.is_authenticated and (user.is_superuser or user.is_staff))
    return {"mail_to_files": settings.EMAIL_FILE_PATH if files and admin else ""}
