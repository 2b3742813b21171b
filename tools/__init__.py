"""Command-line helpers that are not deployed: local stack, resources, mock data."""
