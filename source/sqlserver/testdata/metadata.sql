-- name: cdc/help_change_data_capture
EXEC sys.sp_cdc_help_change_data_capture;

-- name: cdc/get_captured_columns
-- @p1 = nvarchar N'dbo_orders'
EXEC sys.sp_cdc_get_captured_columns @capture_instance = @p1;

-- name: sys.columns/collations
-- @p1 = bigint 245575913
SELECT [c].[name], [c].[collation_name], [c].[is_nullable] FROM [sys].[columns] AS [c] WHERE [c].[object_id] = @p1 ORDER BY [c].[column_id];

-- name: cdc/max_lsn
SELECT sys.fn_cdc_get_max_lsn();

-- name: cdc/min_lsn
-- @p1 = nvarchar N'dbo_Orders'
SELECT sys.fn_cdc_get_min_lsn(@p1);

-- name: cdc/map_lsn_to_time
-- @p1 = varbinary 0x0000002A00000F380003
SELECT sys.fn_cdc_map_lsn_to_time(@p1);

-- name: isolation/read_committed
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

-- name: isolation/snapshot
SET TRANSACTION ISOLATION LEVEL SNAPSHOT;

-- name: isolation/reset
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

-- name: minmax/int
SELECT (SELECT MIN([id]) FROM [dbo].[orders]) AS [min], (SELECT MAX([id]) FROM [dbo].[orders]) AS [max];

-- name: minmax/weird_names
SELECT (SELECT MIN([ü]]]) FROM [we]]ird].[t ab]) AS [min], (SELECT MAX([ü]]]) FROM [we]]ird].[t ab]) AS [max];

-- name: spaceused/int
-- @p1 = nvarchar N'[dbo].[orders]'
EXEC sys.sp_spaceused @objname = @p1;

-- name: spaceused/weird_names
-- @p1 = nvarchar N'[sales ]]x].[Ördersё ''q"]'
EXEC sys.sp_spaceused @objname = @p1;

-- name: changes/orders
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = varbinary 0x0000002A00000F400001
SELECT [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation], [c].[id], [c].[amount], [c].[note], sys.fn_cdc_map_lsn_to_time([c].[__$start_lsn]) AS [__$commit_ts] FROM [cdc].[fn_cdc_get_all_changes_dbo_orders](@p1, @p2, N'all update old') AS [c] ORDER BY [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation];

-- name: changes/weird_names
-- @p1 = varbinary 0x0000002A00000F380003
-- @p2 = varbinary 0x0000002A00000F400001
SELECT [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation], [c].[id ]]]]], [c].[ключ], [c].[a b], sys.fn_cdc_map_lsn_to_time([c].[__$start_lsn]) AS [__$commit_ts] FROM [cdc].[fn_cdc_get_all_changes_sales ]]x_Ördersё](@p1, @p2, N'all update old') AS [c] ORDER BY [c].[__$start_lsn], [c].[__$seqval], [c].[__$operation];

