/* Draws the dashboard's charts from the data the page embeds (json_script "dashboard-data")
   with the vendored Chart.js. window.dashboardCharts holds the Chart objects and
   <body data-charts-ready="true"> says they are drawn. The chain status is fetched on its own
   (verifying walks the whole log): #chain-status gets data-verified once it is in. */
(function () {
  "use strict";
  var chain = document.getElementById("chain-status");
  if (chain && chain.getAttribute("data-src")) {
    fetch(chain.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        chain.outerHTML = html;
      })
      .catch(function (error) {
        chain.removeAttribute("aria-busy");
        chain.setAttribute("data-verified", "unknown");
        chain.className = "chain-broken";
        chain.textContent = "The chain status could not be read (" + error.message + ").";
      });
  }

  var data = JSON.parse(document.getElementById("dashboard-data").textContent);
  var colours = { injected: "#1b7f3b", flagged: "#b3261e", empty: "#6b6b6b" };
  var fallback = ["#1f5fbf", "#8a4baf", "#a15c00", "#00727a"];
  var common = { responsive: true, maintainAspectRatio: false, animation: false };
  var integerAxis = { beginAtZero: true, ticks: { precision: 0 } };
  var charts = {};

  charts.deliveries = new Chart(document.getElementById("chart-deliveries"), {
    type: "bar",
    data: {
      labels: data.days,
      datasets: Object.keys(data.by_status).map(function (status, n) {
        return {
          label: status,
          data: data.by_status[status],
          backgroundColor: colours[status] || fallback[n % fallback.length],
        };
      }),
    },
    options: Object.assign({}, common, {
      scales: { x: { stacked: true }, y: Object.assign({ stacked: true }, integerAxis) },
    }),
  });

  // Deliveries counted by one label ({labels, counts}): bars of one colour, no legend.
  function deliveryBars(canvasId, counted, colour, layout) {
    return new Chart(document.getElementById(canvasId), {
      type: "bar",
      data: {
        labels: counted.labels,
        datasets: [{ label: "deliveries", data: counted.counts, backgroundColor: colour }],
      },
      options: Object.assign({}, common, layout, { plugins: { legend: { display: false } } }),
    });
  }

  charts.trust = deliveryBars("chart-trust", data.trust, "#1f5fbf", {
    scales: { y: integerAxis },
  });

  charts.escalate = new Chart(document.getElementById("chart-escalate"), {
    type: "line",
    data: {
      labels: data.days,
      datasets: [
        {
          label: "ESCALATE share (%)",
          data: data.escalate_share.map(function (share) {
            return share === null ? null : Math.round(share * 1000) / 10;
          }),
          borderColor: "#b3261e",
          backgroundColor: "#b3261e",
          spanGaps: false,
        },
      ],
    },
    options: Object.assign({}, common, { scales: { y: { beginAtZero: true, max: 100 } } }),
  });

  charts.clients = deliveryBars("chart-clients", data.clients, "#8a4baf", {
    indexAxis: "y",
    scales: { x: integerAxis },
  });

  window.dashboardCharts = charts;
  document.body.setAttribute("data-charts-ready", "true");
})();
