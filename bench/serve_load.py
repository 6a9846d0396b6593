#!/usr/bin/env python3
"""Load client of bench/serve_load.sh: CLIENTS threads each POST SEARCHES
uploads to /api/search of a running `lookalike serve`, one connection per
request, the query files taken round-robin from QUERY_FILE... Prints one JSON
line: requests, errors (non-200 answers or failed connections, with the first
few reasons), latency p50 / p90 / p99 / max in ms, wall seconds and requests
per second. Standard library only.

usage: serve_load.py PORT CLIENTS SEARCHES K QUERY_FILE...
"""
import http.client
import json
import sys
import threading
import time
import uuid


def upload(port, name, data, k):
    boundary = uuid.uuid4().hex
    body = (("--%s\r\nContent-Disposition: form-data; name=\"k\"\r\n\r\n%d\r\n"
             "--%s\r\nContent-Disposition: form-data; name=\"image\"; filename=\"%s\"\r\n"
             "Content-Type: application/octet-stream\r\n\r\n") % (boundary, k, boundary, name)
            ).encode() + data + ("\r\n--%s--\r\n" % boundary).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request("POST", "/api/search", body,
                     {"Content-Type": "multipart/form-data; boundary=" + boundary})
        res = conn.getresponse()
        payload = res.read()
        if res.status != 200:
            return "HTTP %d: %s" % (res.status, payload[:200])
        if not json.loads(payload)["results"]:
            return "no results"
        return None
    finally:
        conn.close()


def main():
    port, clients, searches, k = (int(a) for a in sys.argv[1:5])
    files = [(p.rsplit("/", 1)[-1], open(p, "rb").read()) for p in sys.argv[5:]]
    latencies, errors = [], []
    lock = threading.Lock()

    def client(c):
        for i in range(searches):
            name, data = files[(c * searches + i) % len(files)]
            start = time.monotonic()
            try:
                error = upload(port, name, data, k)
            except Exception as e:  # a refused or cut connection is an error too
                error = repr(e)
            with lock:
                latencies.append(time.monotonic() - start)
                if error:
                    errors.append(error)

    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    latencies.sort()

    def pct(p):
        return round(1000 * latencies[min(len(latencies) - 1, int(p * len(latencies)))], 1)

    print(json.dumps({"requests": len(latencies), "errors": len(errors), "first_errors": errors[:3],
                      "p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99),
                      "max_ms": round(1000 * latencies[-1], 1), "wall_seconds": round(wall, 1),
                      "requests_per_second": round(len(latencies) / wall, 2)}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
