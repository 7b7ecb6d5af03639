// Placeholder of the fleet console's script (bloomery console): replaced by
// the real one; it shows /api/overview as text.
fetch("/api/overview").then((r) => r.json()).then((j) => {
  document.getElementById("out").textContent = JSON.stringify(j, null, 2);
});
