#!/bin/sh
# The report's browser test (tests/report/test_browser.py) renders report.html in Debian's
# chromium, and the guide's Chinese quotes need a CJK font. Install both when missing (we are root
# on the dev and CI machines). Never a downloaded browser build. If this cannot install them, it
# says so and carries on: the browser test then FAILS with the same advice, it is never skipped.
command -v chromium >/dev/null 2>&1 && fc-list 2>/dev/null | grep -qi "wenquanyi\|noto sans cjk" && exit 0
if [ -n "$TTSPERF_CHROMIUM" ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; }
fi
command -v chromium >/dev/null 2>&1 \
    || echo "warning: could not install Debian's chromium (needs root and apt); the report's browser test will fail: apt-get install chromium, or set TTSPERF_CHROMIUM=/path/to/chromium" >&2
exit 0
