"""The real-time breaker (`maple_engine.send.contact.Breaker`): it opens only when none of the
last sends succeeded and most failed the same way; an outage's answers (no connection, a
timeout, 502/503/504) are ridden out within each row's budget and never open it."""

from maple_engine.send.contact import TRIP, WINDOW, Breaker, failure_of

SAME = failure_of("server_error", "500: upstream returned an unreadable answer")
DOWN = failure_of("server_error", "503: Service Unavailable")
GONE = failure_of("server_error", "transport: ClientConnectorError")


def opened(sends: list[tuple[str, str] | None]) -> list[int | None]:
    breaker = Breaker()
    return [breaker.watch(send, rate_limited=False, armed=True) for send in sends]


def test_a_window_of_the_same_failure_and_no_success_opens_it() -> None:
    seen = opened([None] * 5 + [SAME] * WINDOW)
    assert seen[-1] == WINDOW and all(s is None for s in seen[: 5 + WINDOW - 1])


def test_a_provider_failing_most_calls_at_random_but_serving_some_keeps_it_shut() -> None:
    # TRIP of WINDOW failed alike: the window the old rule opened on, but some sends succeeded
    window = [SAME] * TRIP + [None] * (WINDOW - TRIP)
    assert opened(window * 5) == [None] * (WINDOW * 5)


def test_an_outage_is_ridden_out_not_a_reason_to_stop() -> None:
    assert opened([None] * 3 + [DOWN] * (WINDOW * 2) + [GONE] * (WINDOW * 2)) == [None] * (
        3 + WINDOW * 4
    )
