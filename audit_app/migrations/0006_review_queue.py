# The review queue: flagged contexts (Review, with the decide_review permission) and contradiction
# findings as the queue shows them (FindingReview, a proxy). New tables only.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit_app', '0005_receipt_identity'),
        ('memoryproject', '0002_default_project'),
    ]

    operations = [
        migrations.CreateModel(
            name='FindingReview',
            fields=[
            ],
            options={
                'verbose_name': 'contradiction finding to review',
                'verbose_name_plural': 'contradiction findings to review',
                'proxy': True,
                'indexes': [],
                'constraints': [],
            },
            bases=('audit_app.contradictionfinding',),
        ),
        migrations.CreateModel(
            name='Review',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('source', models.CharField(max_length=16)),
                ('created_at', models.DateTimeField()),
                ('flagged_injection_id', models.PositiveBigIntegerField(blank=True, help_text='The receipt of the flagged plan (loads write none).', null=True)),
                ('reason', models.TextField()),
                ('trust_score', models.FloatField()),
                ('risk', models.FloatField()),
                ('threshold', models.FloatField()),
                ('decision', models.CharField(max_length=8)),
                ('signals', models.JSONField(default=dict)),
                ('context', models.JSONField(default=dict)),
                ('trace_ids', models.JSONField(default=list)),
                ('items', models.JSONField(default=list)),
                ('text', models.TextField(help_text='The exact text that is delivered once approved.')),
                ('text_sha256', models.CharField(max_length=64)),
                ('state', models.CharField(choices=[('open', 'Open'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('delivered', 'Delivered'), ('void', 'Void')], default='open', max_length=12)),
                ('decided_by', models.CharField(blank=True, max_length=200)),
                ('decided_at', models.DateTimeField(blank=True, null=True)),
                ('decision_reason', models.TextField(blank=True)),
                ('decision_seq', models.PositiveBigIntegerField(blank=True, help_text='The injection log event that records the decision.', null=True)),
                ('delivered_injection_id', models.PositiveBigIntegerField(blank=True, null=True)),
                ('delivered_at', models.DateTimeField(blank=True, null=True)),
                ('note', models.TextField(blank=True, help_text='Why an approved context was not delivered.')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='reviews', to='memoryproject.project')),
            ],
            options={
                'verbose_name': 'flagged context to review',
                'verbose_name_plural': 'flagged contexts to review',
                'ordering': ['-id'],
                'permissions': [('decide_review', 'Can approve or reject flagged contexts and contradiction findings')],
                'indexes': [models.Index(fields=['project', 'state'], name='review_project_state')],
                'constraints': [models.UniqueConstraint(condition=models.Q(('state__in', ['open', 'approved'])), fields=('project', 'source', 'text_sha256'), name='review_pending_once')],
            },
        ),
    ]
