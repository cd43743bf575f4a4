// The new-link page's upload: the file goes to the gateway over tus
// (tus-js-client, vendored beside this file) at /console/uploads/, with
// the console session's cookie, and resumes where it stopped when the
// connection drops. When it is done the form's object fields name the
// stored version, and the link can be made.
"use strict";
(function () {
  var fileInput = document.getElementById("upload-file");
  var keyInput = document.getElementById("upload-key");
  var start = document.getElementById("upload-start");
  if (!fileInput || !start || !window.tus) {
    return;
  }
  var box = document.getElementById("upload-progress");
  var bar = document.getElementById("upload-bar");
  var status = document.getElementById("upload-status");

  function size(n) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    var i = 0;
    while (n >= 1024 && i < units.length - 1) {
      n /= 1024;
      i++;
    }
    return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
  }
  function duration(s) {
    if (!isFinite(s)) {
      return "…";
    }
    if (s < 1) {
      return "under a second";
    }
    s = Math.round(s);
    if (s < 60) {
      return s + " s";
    }
    if (s < 3600) {
      return Math.floor(s / 60) + " min " + (s % 60) + " s";
    }
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }

  fileInput.addEventListener("change", function () {
    var f = fileInput.files[0];
    if (f && !keyInput.value) {
      keyInput.value = "uploads/" + f.name;
    }
  });

  start.addEventListener("click", function () {
    var file = fileInput.files[0];
    if (!file) {
      status.textContent = "Choose a file first.";
      box.hidden = false;
      return;
    }
    var key = keyInput.value || "uploads/" + file.name;
    keyInput.value = key;
    start.disabled = true;
    box.hidden = false;
    bar.value = 0;
    bar.max = Math.max(file.size, 1);
    // The rate is over the last few seconds, so a resumption after a
    // pause does not make the estimate of the time left absurd.
    var samples = [];
    var resumed = 0;
    var upload = new tus.Upload(file, {
      endpoint: "/console/uploads/",
      metadata: { key: key, filename: file.name, content_type: file.type || "application/octet-stream" },
      // Chunks of 16 MiB: a connection cut mid-chunk costs at most that.
      chunkSize: 16 * 1024 * 1024,
      retryDelays: [0, 1000, 2000, 4000, 8000, 15000, 30000],
      removeFingerprintOnSuccess: true,
      onShouldRetry: function (err, attempt) {
        resumed = attempt + 1;
        status.textContent = "Connection lost; resuming (attempt " + resumed + ")…";
        var code = err.originalResponse ? err.originalResponse.getStatus() : 0;
        return code === 0 || code === 409 || code === 423 || code >= 500;
      },
      onProgress: function (sent, total) {
        var now = Date.now();
        samples.push([now, sent]);
        while (samples.length > 2 && now - samples[0][0] > 5000) {
          samples.shift();
        }
        var first = samples[0];
        var rate = now > first[0] ? (sent - first[1]) / ((now - first[0]) / 1000) : 0;
        bar.value = sent;
        status.textContent = size(sent) + " of " + size(total) + " · " + size(Math.max(rate, 0)) + "/s · " +
          duration(rate > 0 ? (total - sent) / rate : Infinity) + " left" + (resumed ? " · resumed" : "");
      },
      onError: function (err) {
        start.disabled = false;
        var code = err.originalResponse ? err.originalResponse.getStatus() : 0;
        status.textContent = "The upload failed" + (code ? " (HTTP " + code + ")" : "") + ". Press Upload to go on from where it stopped.";
      },
      onSuccess: function () {
        // GET of the upload's URL answers the stored object's JSON.
        fetch(upload.url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
          .then(function (r) {
            if (!r.ok) {
              throw new Error("HTTP " + r.status);
            }
            return r.json();
          })
          .then(function (o) {
            document.getElementById("object_key").value = o.key;
            document.getElementById("object_version_id").value = o.version_id;
            document.getElementById("object_bucket").value = o.bucket || "";
            bar.value = bar.max;
            status.textContent = "Uploaded " + size(o.size) + " as " + o.key +
              (resumed ? ", resumed after " + resumed + (resumed === 1 ? " break" : " breaks") : "") + ".";
            document.getElementById("object-sha256").textContent = "SHA-256 " + (o.sha256 || "unknown");
          })
          .catch(function (e) {
            status.textContent = "Uploaded, but the stored object could not be read (" + e.message + "); reload the page.";
          });
      },
    });
    upload.findPreviousUploads().then(function (previous) {
      if (previous.length) {
        upload.resumeFromPreviousUpload(previous[0]);
      }
      upload.start();
    });
  });
})();
