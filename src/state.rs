//! The app state and its URL encoding, in one place.
