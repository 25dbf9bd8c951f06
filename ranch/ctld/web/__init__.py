"""rctld over HTTP (HttpListen=): JSON API, Prometheus /metrics and the web page of the cluster,
served by hypercorn's trio worker inside the controller's own nursery."""
