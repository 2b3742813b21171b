"""Site settings without I/O: goal ids, matching, and the beacon's bounded, expiring cache."""

from __future__ import annotations

import pytest

from chalicelib.core.errors import ValidationError
from chalicelib.sites import names
from chalicelib.sites import settings as site_settings

SITE = "shop.example"


def parsed(goals: list[dict[str, str]], now_ms: int = 1000) -> site_settings.SiteSettings:
    return site_settings.parse_body(SITE, {"goals": goals}, site_settings.SiteSettings(SITE), now_ms)


def test_given_a_goal_renamed_when_parsed_then_its_id_and_visitors_name_stay() -> None:
    before = parsed([{"name": "Signup", "event": "signup"}]).goals[0]
    after = parsed([{"name": "Sign-up", "event": "signup"}]).goals[0]
    other = parsed([{"name": "Signup", "page": "/signup"}]).goals[0]
    assert before.id == after.id != other.id
    assert len(names.goal_visitors_name("s" * names.SITE_MAX_CHARS, before.id)) == 200


def test_given_two_goals_on_one_page_when_matched_then_one_target_counted() -> None:
    found = parsed([{"name": "A", "page": "/p"}, {"name": "B", "page": "/p"}, {"name": "C", "event": "e"}])
    assert [g.name for g in found.goals_of_page("/p")] == ["B"]
    assert [g.name for g in found.goals_of_event("e")] == ["C"]
    assert found.goals_of_page("/q") == found.goals_of_event("p") == []


@pytest.mark.parametrize("zone", ["Europe/Berlin", "Asia/Kathmandu", "Pacific/Chatham", "UTC"])
def test_given_a_known_zone_when_parsed_then_kept(zone: str) -> None:
    assert site_settings.parse_zone(zone) == zone


@pytest.mark.parametrize("zone", ["", "Mars/Olympus", "europe/berlin", "/etc/passwd", "x" * 65, 3])
def test_given_an_unknown_zone_when_parsed_then_refused(zone: object) -> None:
    with pytest.raises(ValidationError):
        site_settings.parse_zone(zone)


def test_given_the_cache_when_sites_pass_its_bound_or_its_time_then_they_are_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(site_settings, "CACHE_MAX_SITES", 2)
    cache, client = site_settings._Cache(), object.__new__(type("Client", (), {}))
    for site in ("a", "b"):
        cache.put(client, site, site_settings.SiteSettings(site), 0)
    assert cache.get(client, "a", 0) is not None  # read: "b" is now the least recently read
    cache.put(client, "c", site_settings.SiteSettings("c"), 0)
    assert cache.get(client, "b", 0) is None
    assert cache.get(client, "a", 0) is not None
    assert cache.get(client, "c", 0) == site_settings.SiteSettings("c")
    assert cache.get(client, "c", site_settings.CACHE_SECONDS * 1000 - 1) is not None
    assert cache.get(client, "c", site_settings.CACHE_SECONDS * 1000) is None
