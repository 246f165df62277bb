"""The three roles and their powers. Used by a data migration; safe to run again."""

from __future__ import annotations

ROLES: dict[str, list[tuple[str, str, str, str]]] = {
    # group: [(app_label, model, codename, name)]
    "managers": [
        ("approvals", "approvalrequest", "decide_approval", "Can approve or reject artifact versions"),
        ("approvals", "approvalrequest", "approve_publish_report", "Can approve publishing a report version"),
        ("approvals", "approvalrequest", "approve_submit_order", "Can approve submitting an order proposal"),
    ],
    "operators": [("executions", "execution", "operate_execution", "Can triage, resume and cancel executions")],
    "auditors": [("approvals", "approvalrequest", "view_audit", "Can read the approval audit trail")],
}


def ensure_roles(apps=None) -> None:
    """Create the groups and their permissions (permissions too: post_migrate runs later)."""
    if apps is None:
        from django.apps import apps as global_apps

        apps = global_apps
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ContentType = apps.get_model("contenttypes", "ContentType")
    for group_name, perms in ROLES.items():
        group, _ = Group.objects.get_or_create(name=group_name)
        for app_label, model, codename, name in perms:
            ct, _ = ContentType.objects.get_or_create(app_label=app_label, model=model)
            perm, _ = Permission.objects.get_or_create(codename=codename, content_type=ct, defaults={"name": name})
            group.permissions.add(perm)


# Who reads the operator audit (triage.operator_audit): operators and auditors.
OPERATOR_AUDIT_READERS = ("executions.operate_execution", "approvals.view_audit")


def reads_operator_audit(user) -> bool:
    return any(user.has_perm(perm) for perm in OPERATOR_AUDIT_READERS)
