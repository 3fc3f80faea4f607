"""Produces click events to the ``clicks`` topic: JSON values, keyed by user.

python examples/generate_clicks.py --count 10000 [--bootstrap 127.0.0.1:9092]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter

from click_topics import CLICKS, ensure_pipeline_topics

from odradek.client import Producer

PAGES = ("/", "/pricing", "/docs", "/blog", "/signup", "/login")


def generate_clicks(bootstrap: str, count: int, topic: str = CLICKS, seed: int = 7) -> Counter[str]:
    """Send ``count`` click events; the number of clicks per page that were sent."""
    rng = random.Random(seed)
    sent: Counter[str] = Counter()
    now_ms = int(time.time() * 1000)
    with Producer(bootstrap_servers=bootstrap, linger_ms=20, compression_type="lz4") as producer:
        for i in range(count):
            user = f"user-{rng.randrange(1000)}"
            page = rng.choices(PAGES, weights=(30, 10, 25, 15, 5, 15))[0]
            event = {"user": user, "page": page, "at": now_ms + i}
            producer.send(topic, json.dumps(event).encode(), key=user.encode())
            sent[page] += 1
        producer.flush()
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--count", type=int, default=10_000)
    args = parser.parse_args()
    ensure_pipeline_topics(args.bootstrap)
    sent = generate_clicks(args.bootstrap, args.count)
    for page, clicks in sorted(sent.items()):
        print(f"{page}\t{clicks}")


if __name__ == "__main__":
    main()
