"""The Kafka door's word that every producer waits for its acks (broker/waiting.py)."""

from __future__ import annotations

from broker.waiting import ProducerWaits


class Agent:
    def __init__(self) -> None:
        self.words = 0

    def senders_waiting(self) -> None:
        self.words += 1


def test_the_word_comes_when_the_last_producing_connection_can_send_no_more() -> None:
    waits, agent = ProducerWaits(), Agent()
    idle, producing, blocked = (False, False), (True, False), (True, True)
    waits.change(idle, producing, agent)  # connection a
    waits.change(idle, producing, agent)  # connection b
    waits.change(producing, blocked, agent)  # a blocked, b still sending
    assert agent.words == 0
    waits.change(producing, blocked, agent)  # b blocked too
    assert agent.words == 1
    waits.change(blocked, blocked, agent)  # no change, no word
    assert agent.words == 1
    waits.change(blocked, producing, agent)  # b answered and sending again
    waits.change(producing, idle, agent)  # b done: only a, blocked, is left
    assert agent.words == 2
    waits.change(blocked, idle, agent)  # a answered: nobody produces
    assert (waits.producing, waits.blocked, agent.words) == (0, 0, 2)
