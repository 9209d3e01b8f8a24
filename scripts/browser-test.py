#!/usr/bin/env python3
"""The timeline page (`sim run FILE --html OUT`) tested in a real browser.

Drives headless Chromium through chromedriver's W3C WebDriver protocol
(plain HTTP and JSON on localhost, Python's standard library only). It
generates pages with the sim binary, opens each from file:// with every
non-local host unresolvable, and checks what a reader would: the lanes and
the number of step marks drawn, a click on a step and the detail panel it
fills, a filter, a search, zoom, and no console error and no network
request at all. It also times the first paint of a 10^4-step page.

    scripts/browser-test.py [--sim target/release/sim] [--screenshot docs/confirm-lost.png]

Needs `chromium` and `chromium-driver` (Debian); CI installs them. Exits
non-zero on the first failed check, naming it.
"""

import argparse
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)
    print(f"  ok  {what}")


class Driver:
    """A WebDriver session on a chromedriver started here."""

    def __init__(self, chromedriver, chromium):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.process = subprocess.Popen(
            [chromedriver, f"--port={self.port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 30
        while True:
            try:
                self.call("GET", "/status")
                break
            except (urllib.error.URLError, ConnectionError):
                if time.time() > deadline:
                    raise Failure("chromedriver did not start within 30 s")
                time.sleep(0.1)
        options = {
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--window-size=1500,950",
                # Any host but localhost is unresolvable: a page that needs
                # the network fails to load what it needs.
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
            ]
        }
        if chromium:
            options["binary"] = chromium
        session = self.call(
            "POST",
            "/session",
            {
                "capabilities": {
                    "alwaysMatch": {
                        "browserName": "chrome",
                        "goog:chromeOptions": options,
                        "goog:loggingPrefs": {"browser": "ALL"},
                    }
                }
            },
        )
        self.session = f"/session/{session['sessionId']}"

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return json.load(response).get("value")
        except urllib.error.HTTPError as error:
            raise Failure(f"WebDriver {method} {path}: {error.read().decode()[:500]}")

    def s(self, method, path, body=None):
        return self.call(method, self.session + path, body)

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def open(self, path):
        self.s("POST", "/url", {"url": "file://" + os.path.abspath(path)})
        deadline = time.time() + 30
        while not self.js("return document.body && document.body.dataset.ready === 'true';"):
            if time.time() > deadline:
                raise Failure(f"{path}: the page never said it was ready")
            time.sleep(0.05)

    def find(self, css):
        found = self.s("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(found.values()))

    def text(self, css):
        return self.s("GET", f"/element/{self.find(css)}/text")

    def type_into(self, css, text):
        element = self.find(css)
        self.s("POST", f"/element/{element}/clear", {})
        self.s("POST", f"/element/{element}/value", {"text": text})

    def click_element(self, css):
        self.s("POST", f"/element/{self.find(css)}/click", {})

    def click_at(self, x, y):
        """A real pointer click at viewport coordinates."""
        self.s(
            "POST",
            "/actions",
            {
                "actions": [
                    {
                        "type": "pointer",
                        "id": "mouse",
                        "parameters": {"pointerType": "mouse"},
                        "actions": [
                            {"type": "pointerMove", "duration": 0, "x": int(round(x)), "y": int(round(y))},
                            {"type": "pointerDown", "button": 0},
                            {"type": "pointerUp", "button": 0},
                        ],
                    }
                ]
            },
        )
        self.s("DELETE", "/actions")

    def wheel_at(self, x, y, delta_y):
        self.s(
            "POST",
            "/actions",
            {
                "actions": [
                    {
                        "type": "wheel",
                        "id": "wheel",
                        "actions": [
                            {"type": "scroll", "x": int(round(x)), "y": int(round(y)),
                             "deltaX": 0, "deltaY": delta_y, "duration": 0}
                        ],
                    }
                ]
            },
        )
        self.s("DELETE", "/actions")

    def drag(self, x, y, dx):
        steps = [{"type": "pointerMove", "duration": 0, "x": int(round(x)), "y": int(round(y))},
                 {"type": "pointerDown", "button": 0}]
        for k in range(1, 6):
            steps.append({"type": "pointerMove", "duration": 20, "x": int(round(x + dx * k / 5)), "y": int(round(y))})
        steps.append({"type": "pointerUp", "button": 0})
        self.s("POST", "/actions", {"actions": [
            {"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": steps}]})
        self.s("DELETE", "/actions")

    def console(self):
        return self.s("POST", "/se/log", {"type": "browser"}) or []

    def screenshot(self, path):
        png = base64.b64decode(self.s("GET", "/screenshot"))
        with open(path, "wb") as out:
            out.write(png)

    def quit(self):
        try:
            self.s("DELETE", "")
        except Exception:
            pass
        self.process.terminate()
        self.process.wait(timeout=10)


def no_console_errors_and_no_network(driver, name):
    errors = [entry for entry in driver.console() if entry.get("level") in ("SEVERE", "WARNING")]
    check(not errors, f"{name}: no console error or warning {errors[:3]}")
    fetched = driver.js("return performance.getEntriesByType('resource').map(e => e.name);")
    check(fetched == [], f"{name}: no resource fetched at all {fetched[:3]}")


def generate(sim, scenario, out, workdir, extra=()):
    """Runs sim on `scenario` with a page and a trace; returns the trace."""
    trace = os.path.join(workdir, os.path.basename(out) + ".jsonl")
    result = subprocess.run(
        [sim, "run", scenario, "--quiet", "--html", out, "--trace", trace, *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if result.returncode not in (0, 1, 3):
        raise Failure(f"sim run {scenario}: exit {result.returncode}: {result.stderr}")
    with open(trace) as lines:
        return [json.loads(line) for line in lines]


def click_step(driver, step):
    position = driver.js("return window.timeline.markPosition(arguments[0]);", step)
    check(position is not None, f"step {step} is on the page")
    driver.click_at(position["x"], position["y"])
    check(driver.js("return window.timeline.selected();") == step, f"a click on step {step}'s mark selects it")
    return driver.text("#detail")


def test_confirm_lost(driver, sim, workdir, screenshot):
    print("confirm-lost")
    page = os.path.join(workdir, "confirm-lost.html")
    trace = generate(sim, "scenarios/confirm-lost.toml", page, workdir)
    driver.open(page)
    lanes = driver.js("return [...document.querySelectorAll('.lane-label')].map(e => e.textContent);")
    for lane in ["client-1", "api-1", "database", "publisher-1", "broker task-work", "broker task-events",
                 "worker-1", "artifact store", "cache", "projector", "reconciler", "operator"]:
        check(lane in lanes, f"lane {lane} is drawn")
    check(driver.js("return window.timeline.rows;") == len(trace), f"the page holds all {len(trace)} steps")
    check(driver.js("return window.timeline.drawn();") == len(trace), f"{len(trace)} step marks are drawn")
    check(driver.js("return window.timeline.arrows;") > 0, "hand-off arrows are drawn")
    summary = driver.text("#summary")
    check("no violation, converged" in summary, "the summary says the run converged")

    lost = next(r for r in trace if r.get("fault") == "publisher.confirm/confirm-lost")
    detail = click_step(driver, lost["step"])
    check("publisher.publish" in detail and "publisher.confirm/confirm-lost" in detail,
          "the detail panel shows the lost confirm's fault")
    check("outbox-1: task-work TaskCreated v0, unpublished, 1 publish attempt(s)" in detail,
          "the detail panel shows outbox-1 still unpublished after the lost confirm")

    deliveries = [r for r in trace if r["action"] == "broker.deliver" and r.get("message") == "outbox-1"]
    check(len(deliveries) == 2, "outbox-1 is delivered twice")
    duplicate = next(r for r in trace if r["action"] == "worker.register" and r["outcome"] == "duplicate")
    detail = click_step(driver, deliveries[1]["step"])
    check(f"to step {duplicate['step']}" in detail, "the second delivery hands off to the worker's register")
    detail = click_step(driver, duplicate["step"])
    check("duplicate" in detail and "inbox outbox-1: completed (completed)" in detail,
          "the detail panel shows the inbox absorbing the duplicate")
    check("task-1: completed v2" in detail, "and the task still completed at version 2")

    entry = duplicate["entry"]
    driver.type_into("#filter", entry)
    expected = sum(1 for r in trace if r.get("entry") == entry)
    check(driver.text("#filter-count") == f"{expected} of {len(trace)} steps match",
          f"the filter {entry} keeps its {expected} steps")
    check(driver.js("return window.timeline.filteredCount();") == expected, "and the page agrees")
    driver.type_into("#filter", "intent-0001")
    expected = sum(1 for r in trace if r.get("task") == "task-1")
    check(driver.text("#filter-count") == f"{expected} of {len(trace)} steps match",
          f"the filter by key keeps task-1's {expected} steps")
    driver.type_into("#filter", "")

    driver.type_into("#search", "outbox-2\n")
    first = next(r["step"] for r in trace if r.get("message") == "outbox-2")
    check(driver.js("return window.timeline.selected();") == first, "search finds outbox-2's first step")

    position = driver.js("return window.timeline.markPosition(arguments[0]);", lost["step"])
    driver.wheel_at(position["x"], position["y"], -800)
    time.sleep(0.2)
    zoomed = driver.js("return window.timeline.drawn();")
    check(0 < zoomed < len(trace), f"the wheel zooms in around a step: fewer marks drawn ({zoomed})")
    moved = driver.js("return window.timeline.markPosition(arguments[0]);", lost["step"])
    check(abs(moved["x"] - position["x"]) < 2, "the step under the pointer stays put")
    driver.drag(position["x"], position["y"] + 200, 300)
    time.sleep(0.2)
    panned = driver.js("return window.timeline.markPosition(arguments[0]);", lost["step"])
    check(abs(panned["x"] - position["x"] - 300) < 2, "a drag pans the time axis")
    driver.click_element("#zoom-out")
    time.sleep(0.2)
    check(driver.js("return window.timeline.drawn();") >= zoomed, "zoom out draws at least as many")
    driver.click_element("#fit")
    time.sleep(0.1)
    check(driver.js("return window.timeline.drawn();") == len(trace), "fit draws every mark again")
    no_console_errors_and_no_network(driver, "confirm-lost")

    if screenshot:
        driver.type_into("#search", "")
        click_step(driver, duplicate["step"])
        time.sleep(0.1)
        driver.screenshot(screenshot)
        print(f"  wrote {screenshot}")


def test_violation(driver, sim, workdir):
    print("a mutant's violation")
    page = os.path.join(workdir, "mutant.html")
    trace = generate(sim, "scenarios/mutants/no-inbox-hash-check.toml", page, workdir)
    driver.open(page)
    summary = driver.text("#summary")
    check("VIOLATION" in summary, "the summary names the violation")
    slice_steps = driver.js("return window.timeline.slice;")
    check(0 < slice_steps <= len(trace), f"the causal slice is highlighted ({slice_steps} steps)")
    last = trace[-1]["step"]
    detail = click_step(driver, last)
    check("violation" in detail.lower(), "the violating step's panel names the violation")
    no_console_errors_and_no_network(driver, "mutant")


def test_crash(driver, sim, workdir):
    print("a crash and a restart")
    page = os.path.join(workdir, "crash.html")
    trace = generate(sim, "scenarios/worker-crash-after-effect.toml", page, workdir)
    driver.open(page)
    crash = next(r for r in trace if r["action"].endswith(".crash"))
    down = driver.js("return [...document.querySelectorAll('.lane-label.down')].map(e => e.textContent);")
    check(crash["actor"] in down, f"{crash['actor']}'s lane shows its crash")
    detail = click_step(driver, crash["step"])
    check(".crash" in detail, "the crash is a step with a record")
    no_console_errors_and_no_network(driver, "crash")


def big_scenario(path, creates, steps_max=10000):
    """A scenario of about 12 steps per create, some faults on the way."""
    with open(path, "w") as out:
        out.write(f'name = "timeline-big"\nseed = 7\nsteps_max = {steps_max}\n\n[config]\n')
        out.write("apis = 2\npublishers = 2\nworkers = 4\nclients = 4\n")
        for i in range(creates):
            out.write(f'\n[[requests]]\nat = {i * 7}\nkind = "create"\nkey = "intent-{i:05}"\n')
            out.write(f'input = {{ doc = "doc-{i}" }}\nclient = "client-{i % 4 + 1}"\n')
        for nth in range(1, 40):
            out.write(f'\n[[faults]]\nsite = "publisher.confirm"\nkind = "confirm-lost"\nnth = {nth * 17}\n')
            out.write(f'\n[[faults]]\nsite = "broker.deliver"\nkind = "duplicate"\nnth = {nth * 23}\n')


def test_big(driver, sim, workdir):
    print("a 10^4-step run")
    scenario = os.path.join(workdir, "big.toml")
    big_scenario(scenario, 700)
    page = os.path.join(workdir, "big.html")
    trace = generate(sim, scenario, page, workdir)
    size = os.path.getsize(page)
    check(len(trace) >= 8000, f"the run took {len(trace)} steps")
    driver.open(page)
    paint = driver.js("return window.timeline.firstPaintMs;")
    check(driver.js("return window.timeline.rows;") == len(trace), f"the page holds all {len(trace)} steps")
    check(driver.js("return window.timeline.drawn();") == len(trace), f"{len(trace)} step marks are drawn")
    check(paint < 1000, f"first paint {paint:.0f} ms after navigation start (< 1000 ms)")
    driver.type_into("#filter", "task-100")
    expected = sum(1 for r in trace if r.get("task") == "task-100")
    check(driver.js("return window.timeline.filteredCount();") == expected, f"filter task-100: {expected} steps")
    no_console_errors_and_no_network(driver, "10^4 steps")
    print(f"  page {size} bytes ({size / len(trace):.0f} bytes/step), {len(trace)} steps, first paint {paint:.0f} ms")


def test_window(driver, sim, workdir):
    print("a run longer than a page")
    scenario = os.path.join(workdir, "window.toml")
    big_scenario(scenario, 4800, steps_max=60000)
    page = os.path.join(workdir, "window.html")
    trace = generate(sim, scenario, page, workdir)
    limit = 50000
    check(len(trace) > limit, f"the run took {len(trace)} steps")
    driver.open(page)
    rows = driver.js("return window.timeline.rows;")
    check(rows == limit, f"the page holds the last {limit} steps")
    check(driver.js("return window.timeline.drawn();") == limit, f"{limit} step marks are drawn")
    banner = driver.text("#banner")
    first = trace[-limit]["step"]
    check(f"took {len(trace)} steps" in banner and f"steps {first}–{trace[-1]['step']}" in banner,
          f"the page says plainly which window it shows: {banner}")
    last = trace[-1]["step"]
    for _ in range(3):
        position = driver.js("return window.timeline.markPosition(arguments[0]);", last)
        driver.wheel_at(position["x"], position["y"], -3000)
        time.sleep(0.2)
    check(driver.js("return window.timeline.drawn();") < 1000, "zoomed in at the end of the window")
    detail = click_step(driver, last)
    check(trace[-1]["action"] in detail, "the last step can be clicked")
    no_console_errors_and_no_network(driver, "window")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", default=os.path.join(ROOT, "target", "release", "sim"))
    parser.add_argument("--screenshot", help="write the confirm-lost page as a PNG here")
    parser.add_argument("--chromedriver", default=shutil.which("chromedriver") or "chromedriver")
    parser.add_argument("--chromium", default=shutil.which("chromium"))
    args = parser.parse_args()
    if not os.path.exists(args.sim):
        sys.exit(f"no sim binary at {args.sim}: build it first (cargo build --release)")
    screenshot = os.path.abspath(args.screenshot) if args.screenshot else None
    driver = Driver(args.chromedriver, args.chromium)
    try:
        with tempfile.TemporaryDirectory() as workdir:
            test_confirm_lost(driver, args.sim, workdir, screenshot)
            test_violation(driver, args.sim, workdir)
            test_crash(driver, args.sim, workdir)
            test_big(driver, args.sim, workdir)
            test_window(driver, args.sim, workdir)
    except Failure as failure:
        print(f"FAILED: {failure}")
        sys.exit(1)
    finally:
        driver.quit()
    print("browser test: every check passed")


if __name__ == "__main__":
    main()
