-- name: cdc/help_change_data_capture
EXEC sys.sp_cdc_help_change_data_capture;

-- name: cdc/help_change_data_capture_of_table
-- @p1 = nvarchar N'dbo'
-- @p2 = nvarchar N'orders'
EXEC sys.sp_cdc_help_change_data_capture @source_schema = @p1, @source_name = @p2;

-- name: cdc/get_captured_columns
-- @p1 = nvarchar N'dbo_orders'
EXEC sys.sp_cdc_get_captured_columns @capture_instance = @p1;

-- name: sys.columns/column_info
-- @p1 = bigint 245575913
-- @p2 = nvarchar N'CodePage'
-- @p3 = bigint 261575970
SELECT [c].[name], [c].[collation_name], [c].[is_nullable], [c].[is_computed], [c].[max_length], CAST(COLLATIONPROPERTY([c].[collation_name], @p2) AS int) AS [code_page], [c].[column_id], [c].[is_identity], TYPE_NAME([c].[system_type_id]) AS [type_name], [c].[precision], [c].[scale], [c].[object_id] FROM [sys].[columns] AS [c] WHERE [c].[object_id] IN (@p1, @p3) ORDER BY [c].[object_id], [c].[column_id];

-- name: sys.indexes/indexes
-- @p1 = bigint 245575913
-- @p2 = bigint 2
-- @p3 = bit false
-- @p4 = bigint 0
SELECT [i].[index_id], [i].[name], [i].[type], [i].[is_unique], [ic].[key_ordinal], [c].[name] AS [column_name] FROM [sys].[indexes] AS [i] LEFT JOIN [sys].[index_columns] AS [ic] ON [ic].[object_id] = [i].[object_id] AND [ic].[index_id] = [i].[index_id] AND [ic].[key_ordinal] > @p4 LEFT JOIN [sys].[columns] AS [c] ON [c].[object_id] = [ic].[object_id] AND [c].[column_id] = [ic].[column_id] WHERE [i].[object_id] = @p1 AND [i].[type] <= @p2 AND [i].[is_disabled] = @p3 AND [i].[is_hypothetical] = @p3 AND [i].[has_filter] = @p3 ORDER BY [i].[index_id], [ic].[key_ordinal];

-- name: probe/uniqueidentifier
-- @p1 = nvarchar N'6f9619ff-8b86-d011-b42d-00c04fc964ff'
SELECT CAST(@p1 AS uniqueidentifier) AS [probe];

-- name: probe/server_now
SELECT SYSDATETIMEOFFSET() AS [now];

-- name: cdc/max_lsn
SELECT sys.fn_cdc_get_max_lsn();

-- name: cdc/min_lsn
-- @p1 = nvarchar N'dbo_Orders'
SELECT sys.fn_cdc_get_min_lsn(@p1);

-- name: cdc/change_access
-- @p1 = nvarchar N'[cdc].[dbo_Orders_CT]'
-- @p2 = nvarchar N'[cdc].[lsn_time_mapping]'
-- @p3 = nvarchar N'OBJECT'
-- @p4 = nvarchar N'SELECT'
SELECT HAS_PERMS_BY_NAME(@p1, @p3, @p4) AS [change_table], HAS_PERMS_BY_NAME(@p2, @p3, @p4) AS [lsn_time_mapping];

-- name: cdc/change_access_weird_name
-- @p1 = nvarchar N'[cdc].[sales ]]x_Ördersё_CT]'
-- @p2 = nvarchar N'[cdc].[lsn_time_mapping]'
-- @p3 = nvarchar N'OBJECT'
-- @p4 = nvarchar N'SELECT'
SELECT HAS_PERMS_BY_NAME(@p1, @p3, @p4) AS [change_table], HAS_PERMS_BY_NAME(@p2, @p3, @p4) AS [lsn_time_mapping];

-- name: cdc/map_lsn_to_time
-- @p1 = varbinary 0x0000002A00000F380003
SELECT sys.fn_cdc_map_lsn_to_time(@p1);

-- name: cdc/clock_back
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = datetime2(7) (civil.DateTime) 2026-10-25T02:00:00
-- @p3 = datetime2(7) (civil.DateTime) 2026-10-25T03:00:00
-- @p4 = varbinary 0x00000000000000000000
-- @p5 = bigint 1
-- @p6 = bigint -1
-- @p7 = varbinary 0x00
SELECT TOP (@p5) [d].[start_lsn] FROM (SELECT ISNULL((SELECT TOP (@p5) [b].[start_lsn] FROM [cdc].[lsn_time_mapping] AS [b] WHERE [b].[tran_end_time] < DATEADD(minute, @p6, @p2) AND [b].[tran_id] <> @p7 ORDER BY [b].[tran_end_time] DESC), @p4) AS [lo]) AS [s] CROSS APPLY (SELECT [m].[start_lsn], [m].[tran_end_time], LAG([m].[tran_end_time]) OVER (ORDER BY [m].[start_lsn]) AS [prev] FROM [cdc].[lsn_time_mapping] AS [m] WHERE [m].[start_lsn] >= [s].[lo] AND [m].[start_lsn] <= @p1 AND [m].[tran_id] <> @p7) AS [d] WHERE [d].[tran_end_time] >= @p2 AND [d].[tran_end_time] < @p3 AND [d].[tran_end_time] < DATEADD(minute, @p6, [d].[prev]) ORDER BY [d].[start_lsn];

-- name: probe/server_version
-- @p1 = nvarchar N'ProductMajorVersion'
-- @p2 = nvarchar N'EngineEdition'
SELECT CAST(SERVERPROPERTY(@p1) AS int) AS [major], CAST(SERVERPROPERTY(@p2) AS int) AS [edition];

-- name: probe/time_zone_id
SELECT CURRENT_TIMEZONE_ID() AS [zone];

-- name: isolation/read_committed
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

-- name: isolation/snapshot
SET TRANSACTION ISOLATION LEVEL SNAPSHOT;

-- name: isolation/reset
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

-- name: lock_timeout/30s
SET LOCK_TIMEOUT 30000;

-- name: lock_timeout/rounded_up
SET LOCK_TIMEOUT 2;

-- name: lock_timeout/reset
SET LOCK_TIMEOUT -1;

-- name: minmax/int
SELECT (SELECT MIN([id]) FROM [dbo].[orders]) AS [min], (SELECT MAX([id]) FROM [dbo].[orders]) AS [max];

-- name: minmax/weird_names
SELECT (SELECT MIN([ü]]]) FROM [we]]ird].[t ab]) AS [min], (SELECT MAX([ü]]]) FROM [we]]ird].[t ab]) AS [max];

-- name: minmax/identity_cast
SELECT CAST((SELECT MIN([id]) FROM [dbo].[ddl]) AS bigint) AS [min], CAST((SELECT MAX([id]) FROM [dbo].[ddl]) AS bigint) AS [max];

-- name: spaceused/int
-- @p1 = nvarchar N'[dbo].[orders]'
EXEC sys.sp_spaceused @objname = @p1;

-- name: spaceused/weird_names
-- @p1 = nvarchar N'[sales ]]x].[Ördersё ''q"]'
EXEC sys.sp_spaceused @objname = @p1;

-- name: changes/orders
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = varbinary 0x0000002A00000F400001
SELECT [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation], [c].[id], [c].[amount], CAST([c].[note] AS varbinary(max)) AS [note], CASE WHEN [c].[__$start_lsn] = LAG([c].[__$start_lsn]) OVER (ORDER BY [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation]) THEN NULL ELSE sys.fn_cdc_map_lsn_to_time([c].[__$start_lsn]) END AS [__$commit_ts] FROM [cdc].[fn_cdc_get_all_changes_dbo_orders](@p1, @p2, N'all update old') AS [c] ORDER BY [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation];

-- name: changes/weird_names
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = varbinary 0x0000002A00000F400001
SELECT [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation], [c].[id ]]]]], [c].[ключ], CAST(CAST([c].[a b] AS nvarchar(max)) AS varbinary(max)) AS [a b], CASE WHEN [c].[__$start_lsn] = LAG([c].[__$start_lsn]) OVER (ORDER BY [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation]) THEN NULL ELSE sys.fn_cdc_map_lsn_to_time([c].[__$start_lsn]) END AS [__$commit_ts] FROM [cdc].[fn_cdc_get_all_changes_sales ]]x_Ördersё](@p1, @p2, N'all update old') AS [c] ORDER BY [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation];

-- name: changes/utf8_and_computed
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = varbinary 0x0000002A00000F400001
SELECT [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation], CAST([c].[name] AS nvarchar(40)) AS [name], CAST(CAST([c].[notes] AS nvarchar(max)) AS varbinary(max)) AS [notes], CAST(CAST([c].[legacy] AS nvarchar(max)) AS varbinary(max)) AS [legacy], CAST(CAST([c].[code] AS nvarchar(3)) AS varbinary(6)) AS [code], CASE WHEN [c].[__$start_lsn] = LAG([c].[__$start_lsn]) OVER (ORDER BY [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation]) THEN NULL ELSE sys.fn_cdc_map_lsn_to_time([c].[__$start_lsn]) END AS [__$commit_ts] FROM [cdc].[fn_cdc_get_all_changes_dbo_cities](@p1, @p2, N'all update old') AS [c] ORDER BY [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation];

-- name: change_table/orders
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = varbinary 0x0000002A00000F400001
SELECT [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation], [c].[__$command_id], [c].[id], [c].[amount], CAST([c].[note] AS varbinary(max)) AS [note], [m].[tran_end_time] AS [__$commit_ts] FROM [cdc].[dbo_orders_CT] AS [c] LEFT JOIN [cdc].[lsn_time_mapping] AS [m] ON [m].[start_lsn] = [c].[__$start_lsn] WHERE [c].[__$start_lsn] >= @p1 AND [c].[__$start_lsn] <= @p2 ORDER BY [c].[__$start_lsn], [c].[__$command_id], [c].[__$seqval], [c].[__$operation];

-- name: change_table/weird_names
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = varbinary 0x0000002A00000F400001
SELECT [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation], [c].[__$command_id], [c].[id ]]]]], [c].[ключ], CAST(CAST([c].[a b] AS nvarchar(max)) AS varbinary(max)) AS [a b], [m].[tran_end_time] AS [__$commit_ts] FROM [cdc].[sales ]]x_Ördersё_CT] AS [c] LEFT JOIN [cdc].[lsn_time_mapping] AS [m] ON [m].[start_lsn] = [c].[__$start_lsn] WHERE [c].[__$start_lsn] >= @p1 AND [c].[__$start_lsn] <= @p2 ORDER BY [c].[__$start_lsn], [c].[__$command_id], [c].[__$seqval], [c].[__$operation];

-- name: change_table/hostile_names
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = varbinary 0x0000002A00000F400001
SELECT [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation], [c].[__$command_id], [c].[k;1], CAST(CAST([c].[v AS varchar] AS nvarchar(10)) AS varbinary(20)) AS [v AS varchar], [m].[tran_end_time] AS [__$commit_ts] FROM [cdc].[dbo_a;b_CT] AS [c] LEFT JOIN [cdc].[lsn_time_mapping] AS [m] ON [m].[start_lsn] = [c].[__$start_lsn] WHERE [c].[__$start_lsn] >= @p1 AND [c].[__$start_lsn] <= @p2 ORDER BY [c].[__$start_lsn], [c].[__$command_id], [c].[__$seqval], [c].[__$operation];

-- name: change_table/utf8_and_computed
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = varbinary 0x0000002A00000F400001
SELECT [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation], [c].[__$command_id], CAST([c].[name] AS nvarchar(40)) AS [name], CAST(CAST([c].[notes] AS nvarchar(max)) AS varbinary(max)) AS [notes], CAST(CAST([c].[legacy] AS nvarchar(max)) AS varbinary(max)) AS [legacy], CAST(CAST([c].[code] AS nvarchar(3)) AS varbinary(6)) AS [code], [m].[tran_end_time] AS [__$commit_ts] FROM [cdc].[dbo_cities_CT] AS [c] LEFT JOIN [cdc].[lsn_time_mapping] AS [m] ON [m].[start_lsn] = [c].[__$start_lsn] WHERE [c].[__$start_lsn] >= @p1 AND [c].[__$start_lsn] <= @p2 ORDER BY [c].[__$start_lsn], [c].[__$command_id], [c].[__$seqval], [c].[__$operation];

-- name: change_table/dropped_and_identity
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = varbinary 0x0000002A00000F400001
SELECT [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation], [c].[__$command_id], CAST([c].[id] AS bigint) AS [id], CAST([c].[v] AS varbinary(40)) AS [v], CAST(CAST([c].[gone] AS nvarchar(10)) AS varbinary(20)) AS [gone], [c].[doc], [c].[rv], [m].[tran_end_time] AS [__$commit_ts] FROM [cdc].[dbo_ddl_CT] AS [c] LEFT JOIN [cdc].[lsn_time_mapping] AS [m] ON [m].[start_lsn] = [c].[__$start_lsn] WHERE [c].[__$start_lsn] >= @p1 AND [c].[__$start_lsn] <= @p2 ORDER BY [c].[__$start_lsn], [c].[__$command_id], [c].[__$seqval], [c].[__$operation];

-- name: changes/dropped_and_identity
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = varbinary 0x0000002A00000F400001
SELECT [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation], CAST([c].[id] AS bigint) AS [id], CAST([c].[v] AS varbinary(40)) AS [v], CAST(CAST([c].[gone] AS nvarchar(10)) AS varbinary(20)) AS [gone], [c].[doc], [c].[rv], CASE WHEN [c].[__$start_lsn] = LAG([c].[__$start_lsn]) OVER (ORDER BY [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation]) THEN NULL ELSE sys.fn_cdc_map_lsn_to_time([c].[__$start_lsn]) END AS [__$commit_ts] FROM [cdc].[fn_cdc_get_all_changes_dbo_ddl](@p1, @p2, N'all update old') AS [c] ORDER BY [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation];

-- name: cdc/get_ddl_history
-- @p1 = nvarchar N'dbo_orders'
EXEC sys.sp_cdc_get_ddl_history @capture_instance = @p1;

