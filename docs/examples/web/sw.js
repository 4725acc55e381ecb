// firebase-messaging-sw.js: a web app's service worker that shows pushes
// and reports them to pushfan. Serve it from your site's root; PUSHFAN is
// pushfan's public URL (PUSHFAN_PUBLIC_URL), and your site's origin must be
// in its PUSHFAN_EVENT_ORIGINS.
import { report, tokenOf } from "https://push.example.com/v1/sdk/pushfan.js";

const PUSHFAN = "https://push.example.com";

// A push arrived: show it, and report it received. FCM's web payload is
// {notification, data}; data.pushfan is the event token.
self.addEventListener("push", (event) => {
  const payload = event.data ? event.data.json() : {};
  const data = payload.data || {};
  const n = payload.notification || {};
  event.waitUntil(
    Promise.all([
      self.registration.showNotification(n.title || "", { body: n.body, icon: n.image, data }),
      report(PUSHFAN, [{ token: tokenOf(data), type: "received" }]).catch(() => {}),
    ]),
  );
});

// The user clicked it: report the click (pushfan counts an open too), then
// open the link. A link the message carried (webpush.fcm_options.link or
// its link_data_key) already leads through pushfan's click redirect, which
// counts the click by itself: then only open it.
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const data = event.notification.data || {};
  const link = data.url;
  const tracked = link && link.startsWith(PUSHFAN + "/v1/c/");
  event.waitUntil(
    Promise.all([
      tracked ? Promise.resolve() : report(PUSHFAN, [{ token: tokenOf(data), type: "clicked" }]).catch(() => {}),
      link ? self.clients.openWindow(link) : Promise.resolve(),
    ]),
  );
});

// The user dismissed it.
self.addEventListener("notificationclose", (event) => {
  const data = event.notification.data || {};
  event.waitUntil(report(PUSHFAN, [{ token: tokenOf(data), type: "dismissed" }]).catch(() => {}));
});
