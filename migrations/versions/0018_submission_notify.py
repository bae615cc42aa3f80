"""PostgreSQL: every statement that changes ``submissions`` sends ``NOTIFY kernelrank_submissions``
(delivered at commit), so that the API's long-polls wake at once (kernelrank/db/changes.py). SQLite
needs nothing: the API watches its write-ahead log.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03 06:30:00
"""
from alembic import op


revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    op.execute("""
        CREATE OR REPLACE FUNCTION kernelrank_submissions_changed() RETURNS trigger AS $$
        BEGIN
            PERFORM pg_notify('kernelrank_submissions', '');
            RETURN NULL;
        END
        $$ LANGUAGE plpgsql
    """)
    op.execute("""
        CREATE TRIGGER submissions_changed AFTER INSERT OR UPDATE OR DELETE ON submissions
        FOR EACH STATEMENT EXECUTE FUNCTION kernelrank_submissions_changed()
    """)


def downgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    op.execute("DROP TRIGGER IF EXISTS submissions_changed ON submissions")
    op.execute("DROP FUNCTION IF EXISTS kernelrank_submissions_changed()")
