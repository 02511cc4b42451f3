-- Test database for source/sqlserver's integration tests (see run.sh).
-- sqlcmd variable: READER_PASSWORD, the least-privilege login's password.
-- The database's default collation is CP1252 (SQL_Latin1_General_CP1_CI_AS):
-- a Greek_CI_AS varchar key bound without COLLATE would turn into '?'s.
SET NOCOUNT ON;
GO
IF DB_ID(N'cdcsnap_it') IS NOT NULL
BEGIN
    ALTER DATABASE cdcsnap_it SET SINGLE_USER WITH ROLLBACK IMMEDIATE;
    DROP DATABASE cdcsnap_it;
END
GO
CREATE DATABASE cdcsnap_it COLLATE SQL_Latin1_General_CP1_CI_AS;
GO
ALTER DATABASE cdcsnap_it SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE cdcsnap_it;
GO
EXEC sys.sp_cdc_enable_db;
GO
-- Numbers 1..40000.
CREATE TABLE dbo.nums (n int NOT NULL PRIMARY KEY);
INSERT INTO dbo.nums (n)
SELECT TOP (40000) ROW_NUMBER() OVER (ORDER BY (SELECT NULL))
FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b;
GO
CREATE TABLE dbo.snap_int (id int NOT NULL PRIMARY KEY, v varchar(20) NULL, amount decimal(18,4) NULL);
INSERT INTO dbo.snap_int (id, v, amount) SELECT n, CONCAT('v', n), n / 7.0 FROM dbo.nums WHERE n <= 10000;
GO
-- (company, id) keys with one, three and twenty leading values, 40000 rows each.
CREATE TABLE dbo.snap_comp1 (company int NOT NULL, id int NOT NULL, v int NULL, PRIMARY KEY (company, id));
CREATE TABLE dbo.snap_comp3 (company int NOT NULL, id int NOT NULL, v int NULL, PRIMARY KEY (company, id));
CREATE TABLE dbo.snap_comp20 (company int NOT NULL, id int NOT NULL, v int NULL, PRIMARY KEY (company, id));
INSERT INTO dbo.snap_comp1 SELECT 1, n, n FROM dbo.nums;
INSERT INTO dbo.snap_comp3 SELECT n % 3, n, n FROM dbo.nums;
INSERT INTO dbo.snap_comp20 SELECT n % 20, n, n FROM dbo.nums;
GO
CREATE TABLE dbo.snap_greek (name varchar(20) COLLATE Greek_CI_AS NOT NULL PRIMARY KEY, v int NULL);
INSERT INTO dbo.snap_greek (name, v) VALUES
 (N'Άλφα', 1), (N'Βήτα', 2), (N'Γάμμα', 3), (N'Δέλτα', 4), (N'Έψιλον', 5),
 (N'Ζήτα', 6), (N'Ήτα', 7), (N'Θήτα', 8), (N'Ιώτα', 9), (N'Κάππα', 10);
GO
-- Mixed case under a case-insensitive collation: 'n' = 'N'.
CREATE TABLE dbo.snap_case (name varchar(10) COLLATE Latin1_General_CI_AS NOT NULL, id int NOT NULL, PRIMARY KEY (name, id));
INSERT INTO dbo.snap_case (name, id) VALUES
 ('a', 1), ('A', 2), ('m', 3), ('n', 4), ('N', 5), ('n', 6), ('N', 7), ('o', 8), ('Z', 9), ('z', 10);
GO
-- Accent-insensitive: 'e' = 'é' = 'E' = 'É' at the source, not in Go: the
-- pieces' guards keep every row in exactly one range.
CREATE TABLE dbo.snap_accent (name varchar(10) COLLATE Latin1_General_CI_AI NOT NULL, id int NOT NULL, PRIMARY KEY (name, id));
INSERT INTO dbo.snap_accent (name, id) VALUES ('d', 1), ('e', 2), (N'é', 3), ('E', 4), (N'É', 5), ('f', 6);
GO
-- Names with ], quotes, spaces and unicode; every type a capture instance holds.
CREATE TABLE dbo.[Kinds ]] 'Ω" ключ] (
    [id ]]x] uniqueidentifier NOT NULL,
    [at] datetime2(7) NOT NULL,
    [b] bit NULL, [ti] tinyint NULL, [si] smallint NULL, [bi] bigint NULL,
    [dec] decimal(38,10) NULL, [num] numeric(5,2) NULL, [m] money NULL, [sm] smallmoney NULL,
    [f] float NULL, [r] real NULL, [d] date NULL, [t0] time(0) NULL, [t7] time(7) NULL,
    [dt] datetime NULL, [sdt] smalldatetime NULL, [dto] datetimeoffset(7) NULL,
    [c] char(3) NULL, [vc] varchar(max) NULL, [nc] nchar(2) NULL, [nv] nvarchar(max) NULL,
    [bin] binary(4) NULL, [vb] varbinary(max) NULL, [x] xml NULL, [rv] rowversion,
    [h] hierarchyid NULL, [geo] geography NULL,
    PRIMARY KEY ([id ]]x], [at])
);
INSERT INTO dbo.[Kinds ]] 'Ω" ключ] ([id ]]x], [at], [b], [ti], [si], [bi], [dec], [num], [m], [sm], [f], [r], [d], [t0], [t7], [dt], [sdt], [dto], [c], [vc], [nc], [nv], [bin], [vb], [x], [h], [geo])
VALUES ('6F9619FF-8B86-D011-B42D-00C04FC964FF', '2024-03-01T12:00:00.1234567', 1, 255, -32768, -9223372036854775808,
        -1234567890123456789012345678.0123456789, 123.45, 922337203685477.5807, -214748.3648,
        0.1, 0.5, '2024-02-29', '23:59:59', '00:00:00.0000001', '2024-01-02T03:04:05.997', '2079-06-06T23:59:00',
        '2024-03-01T12:00:00.0000001+02:00', 'ab', 'x', N'ü', N'ключ', 0x000102FF, 0x, N'<a b="1"/>',
        hierarchyid::Parse('/1/'), geography::Point(47.65, -122.35, 4326)),
       ('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '2024-03-01T12:00:00.1234568', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
GO
-- datetime2(7) keys 100 ns apart under one leading value: a split between
-- them needs the last digit (FACTS.md F31).
CREATE TABLE dbo.snap_dt2 (grp int NOT NULL, at datetime2(7) NOT NULL, PRIMARY KEY (grp, at));
INSERT INTO dbo.snap_dt2 (grp, at)
SELECT 1, DATEADD(NANOSECOND, 100 * (n - 1), CAST('2024-03-01T12:00:00.1234560' AS datetime2(7))) FROM dbo.nums WHERE n <= 10;
GO
-- UTF-8 varchar (SQL Server 2019+, FACTS.md F30): go-mssqldb has no UTF-8
-- code page (F45, F46), so the source reads such columns as nvarchar.
CREATE TABLE dbo.snap_utf8 (
    name varchar(40) COLLATE Latin1_General_100_CI_AS_SC_UTF8 NOT NULL PRIMARY KEY,
    note varchar(max) COLLATE Latin1_General_100_CI_AS_SC_UTF8 NULL);
INSERT INTO dbo.snap_utf8 (name, note) VALUES
 (N'abc', NULL), (N'Kraków', N'Łódź'), (N'Zürich', N'😀 emoji'), (N'Łódź', N'Polska'), (N'Ωmega', N'ключ'), (N'東京', N'日本');
GO
-- Turkish_CI_AS: 'I' pairs with 'ı' and 'i' with 'İ', so 'I' and 'i' are two
-- keys (FACTS.md F23), ordered h < I < i < j.
CREATE TABLE dbo.snap_turkish (name varchar(10) COLLATE Turkish_CI_AS NOT NULL, id int NOT NULL, PRIMARY KEY (name, id));
INSERT INTO dbo.snap_turkish (name, id) SELECT N'I', n FROM dbo.nums WHERE n <= 8;
INSERT INTO dbo.snap_turkish (name, id) SELECT N'i', n FROM dbo.nums WHERE n <= 8;
INSERT INTO dbo.snap_turkish (name, id) VALUES (N'h', 1), (N'j', 1);
GO
-- Written by the tests (fresh ids per run, so the suite reruns against a
-- kept database): a computed column and large objects, which CDC writes
-- as NULL in some change rows (FACTS.md F13); a table whose key the tests
-- update (F14, F10); a table for the bootstrap-and-stream test.
CREATE TABLE dbo.snap_lob (id int NOT NULL PRIMARY KEY, body nvarchar(max) NOT NULL, note text NOT NULL, total AS (id * 2));
CREATE TABLE dbo.snap_keyupd (id int NOT NULL PRIMARY KEY, v int NULL);
CREATE TABLE dbo.snap_stream (id int NOT NULL PRIMARY KEY, v varchar(20) NULL);
INSERT INTO dbo.snap_stream (id, v) SELECT n, CONCAT('v', n) FROM dbo.nums WHERE n <= 1000;
GO
-- A unique index that is not the clustered one (FACTS.md F36), and an
-- instance gated by a role the least-privilege login is not in (F19).
CREATE TABLE dbo.snap_nc (id int NOT NULL, code int NOT NULL, v int NULL,
    CONSTRAINT PK_snap_nc PRIMARY KEY NONCLUSTERED (id), INDEX CX_snap_nc_code CLUSTERED (code));
INSERT INTO dbo.snap_nc (id, code, v) SELECT n, 1000 - n, n FROM dbo.nums WHERE n <= 100;
CREATE TABLE dbo.snap_gated (id int NOT NULL PRIMARY KEY, v int NULL);
INSERT INTO dbo.snap_gated (id, v) VALUES (1, 1);
CREATE ROLE cdc_gate;
-- README's least-privilege recipe (step 3 of "Against your SQL Server"),
-- run as written by TestREADMEGrants on this table and its gating role.
CREATE TABLE dbo.snap_readme (id int NOT NULL PRIMARY KEY, v int NULL);
INSERT INTO dbo.snap_readme (id, v) SELECT n, n FROM dbo.nums WHERE n <= 100;
CREATE ROLE cdc_readme;
GO
DECLARE @t sysname;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_int', @role_name = NULL, @capture_instance = N'dbo_snap_int';
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_comp1', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_comp3', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_comp20', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_greek', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_case', @role_name = NULL, @capture_instance = N'dbo_Snap_Case';
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_accent', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'Kinds ] ''Ω" ключ', @role_name = NULL, @capture_instance = N'dbo_kinds';
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_dt2', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_utf8', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_turkish', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_lob', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_keyupd', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_stream', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_nc', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_gated', @role_name = N'cdc_gate';
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'snap_readme', @role_name = N'cdc_readme';
GO
-- A job change takes effect only after the job is stopped and started
-- again (sys.sp_cdc_change_job, Remarks).
EXEC sys.sp_cdc_change_job @job_type = N'capture', @pollinginterval = 1;
EXEC sys.sp_cdc_stop_job @job_type = N'capture';
EXEC sys.sp_cdc_start_job @job_type = N'capture';
GO
-- Least privilege: SELECT on the source tables, nothing else (no SELECT on
-- the cdc schema, so changes come through the change functions; not in
-- cdc_gate).
IF SUSER_ID(N'cdcsnap_reader') IS NOT NULL DROP LOGIN cdcsnap_reader;
CREATE LOGIN cdcsnap_reader WITH PASSWORD = N'$(READER_PASSWORD)', CHECK_POLICY = OFF, DEFAULT_DATABASE = cdcsnap_it;
CREATE USER cdcsnap_reader FOR LOGIN cdcsnap_reader;
GRANT SELECT ON SCHEMA::dbo TO cdcsnap_reader;
GO
