-- Charging orders (TDengine 3.4.2): every reading of a charging order, with the two before it, as
-- a leaf window inside the order's window; when an order ends, its last short windows close with it.
-- `airflow-stream check -f examples/tdengine/nested.sql` checks it.
-- [START nested]
CREATE STREAM IF NOT EXISTS power.charge
    WINDOW(STATE_WINDOW(trade_no) EXTEND(1) AS w_order, COUNT_WINDOW(3, 1))
    FROM power.monitor
    STREAM_OPTIONS(EVENT_TYPE(WINDOW_CLOSE) | FLUSH_ON_OUTER_CLOSE)
    INTO power.charge_out (ts, leaf_rows, order_rows, order_start)
    AS SELECT _twstart, count(*), w_order._twrownum, w_order._twstart FROM %%trows;
-- [END nested]
