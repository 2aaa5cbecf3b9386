// navd: the portfolio page redraws itself when its history changes
// (docs/chart.md, "Live update"). Served as /assets/live-<hash>.js; the
// page is complete without it. It listens to the page's change stream and,
// when a message touches what the page shows, fetches the same page again
// and swaps the parts that change (#live-head, #live) in place.
(function () {
  'use strict';
  var live = document.getElementById('live');
  var stream = live && live.getAttribute('data-stream');
  if (!stream || !window.EventSource || !window.fetch || !window.DOMParser) return;
  var root = document.documentElement;
  // The status line sits outside the swapped parts, so it stays.
  var status = document.createElement('p');
  status.id = 'live-status';
  status.className = 'sub';
  status.setAttribute('aria-live', 'polite');
  status.style.fontSize = '.85em';
  status.style.margin = '-8px 0 12px';
  var head = document.getElementById('live-head') || live;
  head.parentNode.insertBefore(status, head.nextSibling);
  function say(text, state) {
    status.textContent = text;
    root.setAttribute('data-live', state);
  }

  // Whether a message can change what the page shows: its status, a day
  // of its range, or days removed inside it. Dates are ISO, so strings
  // compare as days do. Read from the current DOM: a redraw updates them.
  function touches(m) {
    var d = document.getElementById('live');
    var to = d.getAttribute('data-to');
    var first = d.getAttribute('data-first');
    var last = d.getAttribute('data-last');
    if (!m || !m.status || m.status.state !== d.getAttribute('data-state')) return true;
    if (!to || !first || !last) return true;
    if (m.changed_from && m.changed_from <= to) return true;
    if (!m.first_day || m.first_day > first) return true;
    return !m.last_day || m.last_day < last;
  }

  // At most one refresh a second, and one at a time: a burst of messages
  // (the parts of one change, a replay) costs one or two fetches.
  var lastRun = 0, timer = null, busy = false, again = false;
  function schedule() {
    if (busy) { again = true; return; }
    if (timer) return;
    timer = setTimeout(refresh, Math.max(0, lastRun + 1000 - Date.now()));
  }
  function swap(doc) {
    ['live-head', 'live'].forEach(function (id) {
      var old = document.getElementById(id);
      var now = doc.getElementById(id);
      if (old && now) old.replaceWith(document.adoptNode(now));
    });
  }
  function refresh() {
    timer = null;
    busy = true;
    lastRun = Date.now();
    fetch(location.href, {credentials: 'same-origin', cache: 'no-store', headers: {Accept: 'text/html'}})
      .then(function (r) {
        // A sign-in that expired answers the sign-in form: stop, and say so.
        if (r.status === 401) { es.close(); throw new Error('signed out'); }
        if (!r.ok) throw new Error('HTTP ' + r.status);
        return r.text();
      })
      .then(function (html) {
        swap(new DOMParser().parseFromString(html, 'text/html'));
        say('updated ' + new Date().toTimeString().slice(0, 8), 'updated');
      })
      .catch(function (e) {
        say(e.message === 'signed out' ? 'signed out: reload the page to sign in'
          : 'could not update: reload the page', 'failed');
      })
      .then(function () {
        busy = false;
        if (again) { again = false; schedule(); }
      });
  }

  var es = new EventSource(stream);
  es.onopen = function () {
    if (root.getAttribute('data-live') !== 'updated') say('live', 'open');
  };
  es.onmessage = function (e) {
    // The last version seen, for whoever inspects the page (and the tests).
    root.setAttribute('data-live-version', e.lastEventId);
    var m = null;
    try { m = JSON.parse(e.data); } catch (_) { /* unknown shape: refresh */ }
    if (touches(m)) schedule();
  };
  es.onerror = function () {
    // CLOSED: refused (signed out, too many streams); the browser gave up.
    // Otherwise it reconnects by itself, resuming after the last version.
    if (es.readyState === EventSource.CLOSED) say('live updates off: reload to retry', 'closed');
    else say('reconnecting\u2026', 'connecting');
  };
})();
