"""Downstream refreshes by itself: the code location ships its automation sensor, running by
default, and ``category_report`` is requested once ``merged`` has a new materialization."""

import dagster as dg

from maple_assets.definitions import defs, product_attributes


def test_the_code_location_automation_sensor_runs_by_default() -> None:
    sensor = defs.resolve_sensor_def("maple_automation")
    assert isinstance(sensor, dg.AutomationConditionSensorDefinition)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    # its target holds the observed input file (its watch sensor records the file's changes)
    graph = defs.resolve_asset_graph()
    targeted = sensor.asset_selection.resolve(graph)
    assert dg.AssetKey("grocery_catalog_file") in targeted
    assert defs.resolve_sensor_def("catalog_watch").default_status == (
        dg.DefaultSensorStatus.RUNNING
    )


def test_a_new_merged_materialization_requests_the_downstream_report() -> None:
    report = dg.AssetKey("category_report")
    with dg.instance_for_test() as instance:
        first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
        instance.report_runless_asset_event(
            dg.AssetMaterialization(asset_key=product_attributes.merged_key)
        )
        second = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=first.cursor
        )
    assert first.get_num_requested(report) == 0  # nothing upstream changed yet
    assert second.get_num_requested(report) == 1


def test_groups_read_left_to_right() -> None:
    graph = defs.resolve_asset_graph()
    group = {key.to_user_string(): graph.get(key).group_name for key in graph.get_all_asset_keys()}
    assert group["grocery_catalog"] == "catalog"
    assert group["product_attributes/merged"] == "product_attributes"
    assert group["category_report"] == "reports"  # not back into "catalog"
