"""The dashboard: its page and static files, served by the app itself. docs/dashboard.md."""
