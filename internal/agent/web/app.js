// Refreshes the page's content every two seconds from /?fragment=1 (the
// same server-side template), while the tab is visible.
"use strict";
(function () {
  const every = 2000;
  const content = document.getElementById("content");
  const updated = document.getElementById("updated");
  const banner = document.getElementById("banner");

  async function refresh() {
    if (document.hidden) return;
    try {
      const resp = await fetch("/?fragment=1", { credentials: "same-origin", cache: "no-store" });
      if (resp.status === 401) {
        window.location.assign("/login");
        return;
      }
      if (!resp.ok) throw new Error(resp.status + " " + resp.statusText);
      content.innerHTML = await resp.text();
      updated.textContent = new Date().toLocaleTimeString();
      banner.hidden = true;
      document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || "0") + 1);
    } catch (err) {
      banner.textContent = "refresh failed: " + err.message;
      banner.hidden = false;
    }
  }
  setInterval(refresh, every);
  document.addEventListener("visibilitychange", refresh);
})();
