"""An agent loop with salience in it, offline: a scripted model, local tools, compaction before every call.

Run: ``python examples/agent_loop.py [--steps N] [--budget TOKENS]``

The "model" is a script of assistant turns (an airline customer-service task: look up
the user, read three reservations, search flights, change one, answer); the tools are
local Python functions that return long JSON, as real tools do. Before each model call
the loop hands the whole history to :class:`salience.adapters.OpenAIContext`, which
compacts it to the budget with a prefix-stable session, and sends what comes back. Each
scripted turn names the values it is about to use (ids, flight numbers); the model
checks that they are still visible in what it was sent.

Per step it prints tokens before -> after, what was kept, trimmed, stubbed and dropped,
how much of the previous request's prefix was reused (what a provider's prompt cache
can hit), and whether the values the step needs were visible; then a summary.
With a real provider, replace ``ScriptedModel.reply`` by the API call:
``client.chat.completions.create(model=..., messages=context.prepare(history))``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import salience  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from salience import Compactor, Transcript  # noqa: E402
from salience.adapters import OpenAIContext  # noqa: E402
from salience.errors import ScorerError  # noqa: E402

SYSTEM = """# Airline agent policy
You are a customer service agent for a regional airline. You can look up users and
reservations, search flights, and change, cancel or book reservations. Before any change
to a booking, list the details and get an explicit "yes" from the user. Never change a
basic economy flight. Payment for a change must come from a method on the user's profile."""

TASK = ("Hi, I'm Olivia Chen, user id olivia_chen_4512. One of my reservations flies JFK to SEA on May 20; "
        "please move it to the earliest direct flight that day and keep everything else the same.")

# -- the tools: local functions with long outputs -----------------------------------------------

AIRPORTS = ["JFK", "SEA", "LAX", "ORD", "ATL", "DFW", "DEN", "SFO", "BOS", "MIA"]


def get_user_details(user_id: str) -> str:
    payment = {f"credit_card_{4400000 + i * 917}": {"brand": ["visa", "mastercard"][i % 2], "last_four": f"{1000 + i}"}
               for i in range(3)}
    payment["gift_card_7302714"] = {"balance": 155}
    return json.dumps({
        "user_id": user_id, "name": {"first_name": "Olivia", "last_name": "Chen"},
        "address": {"address1": "118 Cedar Street", "city": "Portland", "state": "OR", "zip": "97205"},
        "email": "olivia.chen@example.com", "dob": "1987-04-12", "membership": "gold",
        "payment_methods": payment, "saved_passengers": [{"first_name": "Mei", "last_name": "Chen",
                                                          "dob": "2015-09-30"}],
        "reservations": ["ZFA04Y", "JQ7H2B", "PL3K9D", "XW81MN"],
    }, indent=1)


def get_reservation_details(reservation_id: str) -> str:
    seed = sum(map(ord, reservation_id))
    origin, destination = ("JFK", "SEA") if reservation_id == "JQ7H2B" else (
        AIRPORTS[seed % 10], AIRPORTS[(seed // 10) % 10])
    flights = [{"flight_number": f"HAT{(seed + k * 37) % 300:03d}", "origin": origin if k == 0 else destination,
                "destination": destination if k == 0 else origin, "date": f"2024-05-{20 + 7 * k}",
                "price": 120 + (seed + k * 13) % 400} for k in range(2)]
    return json.dumps({
        "reservation_id": reservation_id, "user_id": "olivia_chen_4512", "origin": origin,
        "destination": destination, "flight_type": "round_trip",
        "cabin": "economy" if reservation_id != "PL3K9D" else "basic_economy", "flights": flights,
        "passengers": [{"first_name": "Olivia", "last_name": "Chen", "dob": "1987-04-12"}],
        "payment_history": [{"payment_id": "credit_card_4400917", "amount": sum(f["price"] for f in flights)}],
        "created_at": f"2024-04-{10 + seed % 18}T09:{seed % 60:02d}:00", "total_baggages": 1,
        "nonfree_baggages": 0, "insurance": "no",
    }, indent=1)


def search_direct_flight(origin: str, destination: str, date: str) -> str:
    flights = []
    for k in range(14):
        hour = 5 + k * 45 // 60
        flights.append({
            "flight_number": f"HAT{(k * 29 + 11) % 300:03d}", "origin": origin, "destination": destination,
            "scheduled_departure_time_est": f"{hour:02d}:{(k * 45) % 60:02d}:00",
            "scheduled_arrival_time_est": f"{(hour + 6) % 24:02d}:{(k * 45) % 60:02d}:00",
            "status": "available", "available_seats": {"basic_economy": k % 7, "economy": 3 + k % 11,
                                                       "business": k % 4},
            "prices": {"basic_economy": 90 + k * 3, "economy": 160 + k * 5, "business": 540 + k * 9},
        })
    flights.sort(key=lambda f: f["scheduled_departure_time_est"])
    return json.dumps(flights)


def update_reservation_flights(reservation_id: str, cabin: str, flights: list[dict[str, str]],
                               payment_id: str) -> str:
    return json.dumps({"reservation_id": reservation_id, "status": "updated", "cabin": cabin, "flights": flights,
                       "payment_id": payment_id, "fare_difference": 45}, indent=1)


TOOLS: dict[str, Callable[..., str]] = {
    f.__name__: f for f in (get_user_details, get_reservation_details, search_direct_flight,
                            update_reservation_flights)
}

# -- the scripted model -----------------------------------------------------------------------------


@dataclass
class Turn:
    """One assistant turn: text and/or tool calls; ``needs``: values the turn uses (checked
    against what the model was sent); ``user``: the user's reply that follows, if any."""

    content: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    needs: tuple[str, ...] = ()
    user: str | None = None


SCRIPT = [
    Turn(calls=[("get_user_details", {"user_id": "olivia_chen_4512"})], needs=("olivia_chen_4512",)),
    Turn(calls=[("get_reservation_details", {"reservation_id": "ZFA04Y"})], needs=("ZFA04Y",)),
    Turn(calls=[("get_reservation_details", {"reservation_id": "JQ7H2B"})], needs=("JQ7H2B",)),
    Turn(calls=[("get_reservation_details", {"reservation_id": "PL3K9D"})], needs=("PL3K9D",)),
    Turn(calls=[("get_reservation_details", {"reservation_id": "XW81MN"})], needs=("XW81MN",)),
    Turn(content="Reservation JQ7H2B flies JFK to SEA on 2024-05-20 in economy. Let me look for direct flights.",
         needs=("JQ7H2B", "2024-05-20")),
    Turn(calls=[("search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"})],
         needs=("JFK", "SEA")),
    Turn(content="The earliest direct flight is HAT011, departing 05:00. The fare difference will be charged to "
                 "your card credit_card_4400917. Shall I move JQ7H2B to HAT011, economy, everything else the same?",
         needs=("HAT011", "credit_card_4400917", "JQ7H2B"), user="Yes, please go ahead."),
    Turn(calls=[("update_reservation_flights", {
        "reservation_id": "JQ7H2B", "cabin": "economy", "payment_id": "credit_card_4400917",
        "flights": [{"flight_number": "HAT011", "date": "2024-05-20"}]})],
        needs=("JQ7H2B", "HAT011", "credit_card_4400917")),
    Turn(content="Done: JQ7H2B now flies HAT011 at 05:00 on May 20; the fare difference of $45 went to "
                 "credit_card_4400917.", needs=("JQ7H2B", "HAT011"),
         user="Thanks! And what is the balance on my gift card?"),
    Turn(content="Your gift card gift_card_7302714 has a balance of $155.", needs=("gift_card_7302714",),
         user="Great, that's all."),
    Turn(content="You're welcome, Olivia. Have a good flight!", needs=()),
]


class ScriptedModel:
    """Stands in for a chat-completions API: replies with the next scripted turn."""

    def __init__(self, script: list[Turn]) -> None:
        self.script = script
        self.calls = 0

    def reply(self, messages: list[dict[str, Any]]) -> tuple[dict[str, Any], int, int]:
        """``(assistant message, values needed, of which visible in messages)``."""
        turn = self.script[self.calls]
        visible_text = json.dumps(messages, ensure_ascii=False)
        seen = sum(value in visible_text for value in turn.needs)
        message: dict[str, Any] = {"role": "assistant", "content": turn.content}
        if turn.calls:
            message["tool_calls"] = [
                {"id": f"call_{self.calls}_{j}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}}
                for j, (name, args) in enumerate(turn.calls)
            ]
        self.calls += 1
        return message, len(turn.needs), seen


def make_compactor(budget: int) -> Compactor:
    from salience import default_scorer

    try:
        scorer: Any = default_scorer()
    except ScorerError as exc:
        warnings.warn(f"default scorer unavailable ({exc}); using the recency and role prior", stacklevel=2)
        scorer = None  # the Compactor falls back to its prior
    return Compactor(scorer=scorer, budget=budget, pin_last=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=len(SCRIPT), help=f"model calls (at most {len(SCRIPT)})")
    parser.add_argument("--budget", type=int, default=2000, help="token budget of each request")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    compactor = make_compactor(args.budget)
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    if compactor.scorer is not None:  # load the scorer's models now, as an agent would at start-up
        compactor.scorer.score(Transcript.from_openai(history))
    print(f"scorer ready in {time.perf_counter() - started:.1f} s; budget {args.budget:,} tokens per request; "
          f"{min(args.steps, len(SCRIPT))} model calls\n")
    context = OpenAIContext(compactor)
    model = ScriptedModel(SCRIPT)
    needed = visible = 0
    for _ in range(min(args.steps, len(SCRIPT))):
        request = context.prepare(history)  # <- the one line an agent loop adds
        step = context.history[-1]
        reply, need, seen = model.reply(request)
        needed += need
        visible += seen
        print(f"{step.line()}; needs {seen}/{need} visible")
        history.append(reply)
        for call in reply.get("tool_calls") or []:
            fn = call["function"]
            output = TOOLS[fn["name"]](**json.loads(fn["arguments"]))
            history.append({"role": "tool", "tool_call_id": call["id"], "name": fn["name"], "content": output})
        turn = SCRIPT[model.calls - 1]
        if turn.user:
            history.append({"role": "user", "content": turn.user})
    stats = context.stats()
    print(f"\nsummary: {stats.summary()}")
    if needed:
        print(f"values the steps needed that were visible: {visible}/{needed} ({visible / needed:.0%})")
    print(f"wall time {time.perf_counter() - started:.1f} s (scorer load included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
