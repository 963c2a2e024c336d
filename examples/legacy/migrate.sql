-- A legacy stream to print in TDengine 3.3.7's syntax: airflow-stream check --to 3.3.7 -f examples/legacy/migrate.sql
-- [START migrate]
create stream s trigger at_once into o as
    select _wstart, count(*) from t interval(10s);
-- [END migrate]

-- [START pause_resume]
PAUSE STREAM IF EXISTS s;
RESUME STREAM IF EXISTS IGNORE UNTREATED s;
-- [END pause_resume]
