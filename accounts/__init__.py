"""Who may do what: API tokens (``tokens``, the ``create_api_token`` and
``revoke_api_token`` commands), the roles — the groups and their permissions
(``roles``, created by a data migration) — and the PostgreSQL role the application
connects as (``database_roles``, the ``grant_app_role`` command).

The bottom of the house, beside ``artifacts``: every app that authenticates or
authorises may import it; it imports none of them.
"""
