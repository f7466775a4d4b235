//! The slot driver: provision, snapshot, restore, reset, cleanup, status, with fail-closed gates.
