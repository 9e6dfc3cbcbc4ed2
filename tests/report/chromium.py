"""Drive the system's headless Chromium over the DevTools protocol (a websocket, aiohttp's client):
open a page, collect console errors, exceptions and any network request, take a full-page
screenshot and the boxes of chosen elements. No downloaded browser, no playwright.

Also a script: `python tests/report/chromium.py report.html shot.png [width]`.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """TTSPERF_CHROMIUM if set, else the first browser on PATH."""
    return os.environ.get("TTSPERF_CHROMIUM") or next((p for p in map(shutil.which, BROWSERS) if p), None)


@dataclass
class PageResult:
    png: bytes
    # element id (or tag + index) -> x, y, width, height (page coordinates) and text as shown
    boxes: dict[str, dict[str, Any]]
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    title: str = ""
    probe: Any = None  # what `script` returned, at the window's size (800 x 900: a reader's window)


class _Cdp:
    def __init__(self, ws) -> None:
        self.ws, self.ids, self.events = ws, itertools.count(1), []
        self.pending: dict[int, asyncio.Future] = {}

    async def pump(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            else:
                self.events.append(data)

    async def call(self, method: str, session: str | None = None, **params) -> dict:
        i = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        self.pending[i] = fut
        msg = {"id": i, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        await self.ws.send_str(json.dumps(msg))
        data = await asyncio.wait_for(fut, 120)
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        return data.get("result", {})


async def _render(url: str, selector: str, width: int, ws_url: str, script: str | None) -> PageResult:
    async with aiohttp.ClientSession() as http, http.ws_connect(ws_url, max_msg_size=0) as ws:
        cdp = _Cdp(ws)
        pump = asyncio.create_task(cdp.pump())
        target = (await cdp.call("Target.createTarget", url="about:blank"))["targetId"]
        s = (await cdp.call("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            await cdp.call(f"{domain}.enable", s)
        await cdp.call(
            "Emulation.setDeviceMetricsOverride",
            s,
            width=width,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        await cdp.call("Page.navigate", s, url=url)
        for _ in range(600):  # the load event, then a moment for late console messages
            if any(e.get("method") == "Page.loadEventFired" for e in cdp.events):
                break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"{url}: no load event within 60 s")
        await asyncio.sleep(0.5)
        probe = None
        if script:  # before the window grows to the page: the layout (and scrollbar) a reader has
            got = await cdp.call("Runtime.evaluate", s, expression=script, returnByValue=True)
            if "exceptionDetails" in got:
                raise RuntimeError(f"script: {got['exceptionDetails']}")
            probe = got["result"].get("value")
        # Grow the viewport to the whole page (until its height stops changing) so that the boxes
        # measured next are where the screenshot has them.
        height = 0
        for _ in range(5):
            h = await cdp.call("Runtime.evaluate", s, expression="document.documentElement.scrollHeight")
            if h["result"]["value"] == height:
                break
            height = h["result"]["value"]
            await cdp.call("Emulation.setDeviceMetricsOverride", s, width=width, height=height,
                           deviceScaleFactor=1, mobile=False)  # fmt: skip
        js = (
            f"JSON.stringify(Array.from(document.querySelectorAll({json.dumps(selector)})).map((e, i) => {{"
            "const r = e.getBoundingClientRect(); return [e.id || e.tagName.toLowerCase() + i, "
            "{x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height, text: e.innerText}]}))"
        )
        boxes = dict(json.loads((await cdp.call("Runtime.evaluate", s, expression=js))["result"]["value"]))
        title = (await cdp.call("Runtime.evaluate", s, expression="document.title"))["result"]["value"]
        shot = await cdp.call("Page.captureScreenshot", s, format="png")
        pump.cancel()
    res = PageResult(base64.b64decode(shot["data"]), boxes, title=title, probe=probe)
    for e in cdp.events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
            res.errors.append(f"console.{p['type']}: {[a.get('value') for a in p.get('args', [])]}")
        elif m == "Runtime.exceptionThrown":
            res.errors.append(f"exception: {p['exceptionDetails'].get('text')}")
        elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
            res.errors.append(f"log {p['entry']['level']}: {p['entry']['text']}")
        elif m == "Network.requestWillBeSent":
            res.requests.append(p["request"]["url"])
        elif m == "Network.loadingFailed":
            res.errors.append(f"load failed: {p.get('errorText')}")
    return res


def render(
    path: Path, selector: str = "figure.chart", width: int = 1360, script: str | None = None
) -> PageResult:
    """Open `path` in headless Chromium; every element matching `selector` gets its box, and
    `script` (a JavaScript expression) is evaluated in the page, its value returned as `probe`."""
    exe = find_chromium()
    if exe is None:
        raise RuntimeError(f"no Chromium found (looked for {', '.join(BROWSERS)})")
    # Chromium's helper processes may still write to the profile while it is removed after the
    # browser exits ("Directory not empty: 'Default'" under make test's load): not the test's concern
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        args = [
            exe,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "--disable-background-networking",
            "--disable-component-update",
            "about:blank",
        ]
        proc = subprocess.Popen(
            args, stderr=subprocess.PIPE, text=True, env={**os.environ, "LANG": "C.UTF-8"}
        )
        try:
            ws_url = None
            for line in proc.stderr:  # "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
                if m := re.search(r"DevTools listening on (ws://\S+)", line):
                    ws_url = m.group(1)
                    break
            if ws_url is None:
                raise RuntimeError(f"{exe} exited ({proc.wait()}) without a DevTools endpoint")
            return asyncio.run(_render(path.resolve().as_uri(), selector, width, ws_url, script))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    page = render(Path(sys.argv[1]), width=int(sys.argv[3]) if len(sys.argv) > 3 else 1360)
    Path(sys.argv[2]).write_bytes(page.png)
    print(f"{len(page.boxes)} charts, errors: {page.errors}, requests: {page.requests}")
