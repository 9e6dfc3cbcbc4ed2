// What tests/report/test_layout.py checks in the browser, measured at the window's size: the page's
// sideways overflow, every command's words and the lines they fell on, every answer box's look,
// and the box of every text drawn in every chart. One expression, its value returned as JSON.
(() => {
  const se = document.scrollingElement;
  const box = (e) => { const r = e.getBoundingClientRect();
                       return {x: r.x, y: r.y, w: r.width, h: r.height}; };
  // Each word of a <code> (a maximal run without spaces) with the distinct line tops it lies on:
  // a word broken across lines ("serve -" / "-device") lies on two.
  const commands = Array.from(document.querySelectorAll("code"), (code) => {
    const words = [];
    const walk = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      for (const m of n.data.matchAll(/\S+/g)) {
        const r = document.createRange();
        r.setStart(n, m.index);
        r.setEnd(n, m.index + m[0].length);
        const tops = [...new Set(Array.from(r.getClientRects(), (q) => Math.round(q.top)))];
        words.push({word: m[0], tops});
      }
    }
    return {text: code.innerText, words};
  });
  const answers = Array.from(document.querySelectorAll(".answer"), (a) => {
    const st = getComputedStyle(a), dd = a.querySelector("dd");
    return {id: a.id, title: a.querySelector("h2").innerText, ...box(a),
            background: st.backgroundColor, border: st.borderLeft,
            sentence: (a.querySelector(".recommendation") || {}).innerText,
            ddFont: dd ? getComputedStyle(dd).fontSize : null};
  });
  const loose = Array.from(document.querySelectorAll(".recommendation, ul.others"))
    .filter((e) => !e.closest(".answer")).map((e) => e.innerText);
  const charts = Array.from(document.querySelectorAll("figure.chart"), (f) => ({
    id: f.id,
    texts: Array.from(f.querySelectorAll("svg text"), (t) => ({text: t.textContent, ...box(t)})),
  }));
  return {scrollWidth: se.scrollWidth, clientWidth: se.clientWidth, commands, answers, loose, charts};
})()
