// gg's web console: keep the page's live part current, and ask before a destructive button.
// Written for gg, no libraries. The page long-polls /ui/wait; when it answers, the live
// part is fetched again (server-rendered) and swapped in: no page reload.
"use strict";

(function () {
  // Ask before a form marked data-confirm is posted (cancel, drain, clear).
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });

  var live = document.getElementById("live");
  var status = document.getElementById("live-status");
  if (!live) {
    return;
  }

  function say(text, state) {
    if (status) {
      status.textContent = text;
      status.setAttribute("data-state", state);
    }
  }

  function pause(ms) {
    return new Promise(function (resolve) { window.setTimeout(resolve, ms); });
  }

  function signedOut(response) {
    if (response.status === 401) {
      window.location.assign("/ui/login");
      return true;
    }
    return false;
  }

  async function refresh() {
    var output = document.getElementById("output");
    var atBottom = output && output.scrollTop + output.clientHeight >= output.scrollHeight - 4;
    var response = await fetch(live.getAttribute("data-part"), {credentials: "same-origin"});
    if (signedOut(response)) {
      return false;
    }
    if (!response.ok) {
      throw new Error("the page answered " + response.status);
    }
    live.innerHTML = await response.text();
    output = document.getElementById("output");
    if (output && atBottom) {
      output.scrollTop = output.scrollHeight;
    }
    return true;
  }

  async function follow() {
    var failures = 0;
    say("live", "live");
    for (;;) {
      try {
        var query = new URLSearchParams({after: live.getAttribute("data-after") || "0"});
        var flight = live.getAttribute("data-flight");
        if (flight) {
          query.set("flight", flight);
          query.set("facts", live.getAttribute("data-facts") || "0");
        }
        var response = await fetch("/ui/wait?" + query.toString(), {credentials: "same-origin"});
        if (signedOut(response)) {
          return;
        }
        if (!response.ok) {
          throw new Error("the server answered " + response.status);
        }
        var seen = await response.json();
        if (!(await refresh())) {
          return;
        }
        live.setAttribute("data-after", String(seen.after));
        live.setAttribute("data-facts", String(seen.facts));
        failures = 0;
        say("live", "live");
      } catch (error) {
        failures += 1;
        say("reconnecting (" + error.message + ")", "lost");
        await pause(Math.min(30000, 1000 * Math.pow(2, Math.min(failures, 5))));
      }
    }
  }

  follow();
})();
