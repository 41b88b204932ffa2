/* Click (or Enter on) a heading of a table.sortable to sort its rows by that column, again to reverse.
   Numbers sort by the cell's data-value; cells without a figure stay last. Without script the table keeps
   the order of the run. */
(function () {
  "use strict";
  function key(cell) {
    var v = cell.getAttribute("data-value");
    return v === null || v === "" ? null : parseFloat(v);
  }
  function sortBy(table, th, col) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var up = th.getAttribute("aria-sort") !== "ascending";
    var numeric = th.classList.contains("num");
    rows.sort(function (a, b) {
      if (!numeric) {
        var ta = a.cells[col].textContent, tb = b.cells[col].textContent;
        return (up ? 1 : -1) * ta.localeCompare(tb);
      }
      var x = key(a.cells[col]), y = key(b.cells[col]);
      if (x === null || y === null) { return (x === null) - (y === null); }
      return up ? x - y : y - x;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(th.parentNode.cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    var head = table.tHead.rows[table.tHead.rows.length - 1];
    Array.prototype.forEach.call(head.cells, function (th, col) {
      th.tabIndex = 0;
      th.title = "sort by " + th.textContent;
      th.addEventListener("click", function () { sortBy(table, th, col); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(table, th, col); }
      });
    });
  });
}());

/* Detail sections are closed <details>: a link to one (the contents, #fidelity) opens it, and printing opens
   them all (the printed page keeps every section), and the verdict's notes on codecs not compared. */
(function () {
  "use strict";
  function open(hash) {
    var target = hash && document.getElementById(hash.slice(1));
    var box = target && target.querySelector("details.part");
    if (box) { box.open = true; }
  }
  window.addEventListener("hashchange", function () { open(location.hash); });
  open(location.hash);
  window.addEventListener("beforeprint", function () {
    Array.prototype.forEach.call(document.querySelectorAll("details.part, details.not-compared"),
                               function (d) { d.open = true; });
  });
}());
