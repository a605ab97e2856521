"""Report templates (Jinja2, autoescape on), installed as the package ``forensics_reports``."""
