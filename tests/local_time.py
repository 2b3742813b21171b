"""What the local-time tests share: the zones and days they are tested on, and each calendar
window's local dates worked out by hand."""

from __future__ import annotations

from datetime import date, timedelta

# A zone, and a now a week or so after the day with its change of offset (if any).
ZONE_CASES = [
    ("America/New_York", "2026-11-09T12:00:00Z"),  # 1 November 2026: 25 hours
    ("America/New_York", "2026-03-15T12:00:00Z"),  # 8 March 2026: 23 hours
    ("Asia/Kolkata", "2026-11-18T11:06:40Z"),
    ("Asia/Kathmandu", "2026-11-18T11:06:40Z"),
    ("Pacific/Chatham", "2026-04-10T00:00:00Z"),  # 5 April 2026: clocks back at 03:45 +13:45
]


def calendar_dates(window: str, today: date) -> tuple[date, date | None]:
    """The first local date of a calendar window and the date after it (None: it ends at now)."""
    monday = today - timedelta(days=today.weekday())
    month = today.replace(day=1)
    previous_month = (month - timedelta(days=1)).replace(day=1)
    return {
        "today": (today, None),
        "yesterday": (today - timedelta(days=1), today),
        "this_week": (monday, None),
        "last_week": (monday - timedelta(days=7), monday),
        "this_month": (month, None),
        "last_month": (previous_month, month),
        "this_year": (date(today.year, 1, 1), None),
    }[window]
