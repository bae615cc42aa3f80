"""The HTML pages, one router per area, each calling the same service functions as the JSON API."""
