"""Insert triggers (IoTDB's ``CREATE TRIGGER``): the registry, the user's class, and firing it.

A trigger is a user class (:class:`airflow_stream_provider.InsertTrigger`) that listens to writes
on a path pattern:

- :mod:`.registry`: ``registry.json`` of the trigger folder and the fire counts in ``stats.json``;
- :mod:`.instance`: the files of ``USING URI``, the class loaded from them, and a live :class:`Instance`;
- :mod:`.client`: :class:`NodeClient`, a writer's line to the STATEFUL triggers of the stream node;
- :mod:`.listener`: the warehouse's insert listener that fires them (importing this package registers it);
- :mod:`.statements`: CREATE, DROP and SHOW TRIGGERS.

A STATELESS trigger has an instance in each writing process (created at its first matching write:
``validate`` then ``on_create``); a STATEFUL one has a single instance in the stream node, which
writers call over the node's trigger port (:mod:`airflow_stream_provider.node.stateful_triggers`).
"""

from airflow_stream_provider.streams.insert_triggers.client import NodeClient, NodeDown, tablet_from_json, tablet_json
from airflow_stream_provider.streams.insert_triggers.instance import (
    Instance,
    TriggerTimeout,
    fire_timeout,
    install,
    load_class,
    setup_timeout,
)
from airflow_stream_provider.streams.insert_triggers.listener import LISTENER, InsertTriggers, TriggerHome
from airflow_stream_provider.streams.insert_triggers.registry import Entry, TriggerError, TriggerRegistry, folder
from airflow_stream_provider.streams.insert_triggers.statements import SHOW_COLUMNS, create, drop, show

__all__ = ["LISTENER", "SHOW_COLUMNS", "Entry", "InsertTriggers", "Instance", "NodeClient", "NodeDown", "TriggerError",
           "TriggerHome", "TriggerRegistry", "TriggerTimeout", "create", "drop", "fire_timeout", "folder", "install",
           "load_class", "setup_timeout", "show", "tablet_from_json", "tablet_json"]
