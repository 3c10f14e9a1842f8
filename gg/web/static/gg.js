// gg's web console: keep the page's live part current, and ask before a destructive button.
// Written for gg, no libraries. The page long-polls /ui/wait; when it answers, the live
// part is fetched again (server-rendered) and swapped in: no page reload.
"use strict";

(function () {
  var live = document.getElementById("live");
  var status = document.getElementById("live-status");
  var notice = document.getElementById("notice");

  // A button in the live part (cancel, clear, cordon, drain, resume) asks first when its form
  // says data-confirm, then posts the same form in the background and shows the answer in
  // place; without this script the form still posts and the page comes back.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
      return;
    }
    if (live && live.contains(form)) {
      event.preventDefault();
      post(form);
    }
  });

  function tell(text) {
    if (notice) {
      notice.textContent = text;
      notice.hidden = !text;
    }
  }

  async function post(form) {
    var button = form.querySelector("button");
    if (button) {
      button.disabled = true;
    }
    try {
      var response = await fetch(form.action, {
        method: "POST", credentials: "same-origin",
        body: new URLSearchParams(new FormData(form)),
      });
      if (response.ok) {
        tell("");
      } else {
        var answer = new DOMParser().parseFromString(await response.text(), "text/html");
        var refusal = answer.querySelector(".refusal");
        tell(refusal ? refusal.textContent : "the server answered " + response.status);
      }
      await refresh();
    } catch (error) {
      tell("not sent: " + error.message);
      if (button) {
        button.disabled = false;
      }
    }
  }

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

  var SPACING = 1000;  // ms between two refreshes of the live part, at least
  var lastRefresh = 0;

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
        var since = Date.now() - lastRefresh;
        if (since < SPACING) {
          await pause(SPACING - since);  // a burst of events: one refresh a second is enough
        }
        lastRefresh = Date.now();
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
