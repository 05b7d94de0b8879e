// Local time beside each UTC time in the console: the same instant, in the reader's zone.
(function () {
  "use strict";
  function fill() {
    var cells = document.querySelectorAll(".local-time[data-utc]");
    for (var i = 0; i < cells.length; i++) {
      var when = new Date(cells[i].getAttribute("data-utc"));
      if (isNaN(when.getTime())) continue;
      var text = when.toLocaleString(undefined, {
        year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false,
        timeZoneName: "short"
      });
      cells[i].textContent = "local: " + text;
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fill);
  else fill();
})();
