"""The audit console's own pages (outside the admin's model pages): the dashboard."""
