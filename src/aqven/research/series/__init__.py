"""Series: start, schedule, end, view, and the service the server offers."""
