
import django.db.models.deletion
import django_fsm
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('executions', '0005_api_token_expiry'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='action',
            name='gate_ref',
            field=models.CharField(blank=True, db_index=True, default='', max_length=100),
        ),
        # What authorised an action was a foreign key into approvals; now the gate's own
        # reference ("approval:<id>"), so the runtime's tables don't depend on approvals.
        migrations.RunSQL(
            "UPDATE executions_action SET gate_ref = 'approval:' || approval_request_id "
            "WHERE approval_request_id IS NOT NULL",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.RemoveField(
            model_name='action',
            name='approval_request',
        ),
        migrations.AddField(
            model_name='execution',
            name='reason_code',
            field=models.CharField(blank=True, default='', max_length=40),
        ),
        migrations.AlterField(
            model_name='action',
            name='status',
            field=django_fsm.FSMField(choices=[('planned', 'Planned'), ('approved', 'Approved'), ('executing', 'Executing'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('unknown', 'Unknown')], default='planned', max_length=50, protected=True),
        ),
        migrations.CreateModel(
            name='Wait',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('step', models.CharField(max_length=100)),
                ('round', models.PositiveIntegerField(default=1)),
                ('signal', models.CharField(blank=True, default='', max_length=100)),
                ('status', django_fsm.FSMField(choices=[('waiting', 'Waiting'), ('received', 'Received'), ('timed_out', 'Timed Out'), ('withdrawn', 'Withdrawn')], db_index=True, default='waiting', max_length=50, protected=True)),
                ('opened_at', models.DateTimeField(auto_now_add=True)),
                ('due_at', models.DateTimeField(blank=True, null=True)),
                ('closed_at', models.DateTimeField(blank=True, null=True)),
                ('event_id', models.CharField(blank=True, max_length=100, null=True, unique=True)),
                ('payload', models.JSONField(blank=True, null=True)),
                ('reason', models.TextField(blank=True, default='')),
                ('execution_status', models.CharField(blank=True, default='', max_length=30)),
                ('execution', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='waits', to='executions.execution')),
                ('sent_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['id'],
                'constraints': [models.UniqueConstraint(fields=('execution', 'step', 'round'), name='one_wait_per_step_round')],
            },
            bases=(django_fsm.ConcurrentTransitionMixin, models.Model),
        ),
    ]
