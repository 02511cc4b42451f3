-- name: composite/from_start
-- @p1 = bigint 10001
-- @p2 = bigint 10000
SELECT [s].[company], [s].[id] FROM (
SELECT [q0].[company], [q0].[id] FROM (SELECT TOP (@p1) [company], [id] FROM [dbo].[lines] ORDER BY [company], [id]) AS [q0]
) AS [s] ORDER BY [s].[company], [s].[id] OFFSET @p2 ROWS FETCH NEXT 1 ROWS ONLY;

-- name: composite/from_key
-- @p1 = bigint 10001
-- @p2 = bigint 3
-- @p3 = bigint 500
-- @p4 = bigint 10000
SELECT [s].[company], [s].[id] FROM (
SELECT [q0].[company], [q0].[id] FROM (SELECT TOP (@p1) [company], [id] FROM [dbo].[lines] WHERE [company] = CAST(@p2 AS int) AND [id] >= CAST(@p3 AS bigint) ORDER BY [company], [id]) AS [q0]
UNION ALL
SELECT [q1].[company], [q1].[id] FROM (SELECT TOP (@p1) [company], [id] FROM [dbo].[lines] WHERE [company] > CAST(@p2 AS int) ORDER BY [company], [id]) AS [q1]
) AS [s] ORDER BY [s].[company], [s].[id] OFFSET @p4 ROWS FETCH NEXT 1 ROWS ONLY;

-- name: varchar_greek/from_key
-- @p1 = bigint 4
-- @p2 = nvarchar N'Δέλτα'
-- @p3 = bigint 3
SELECT CAST([s].[name] AS nvarchar(20)) AS [name] FROM (
SELECT [q0].[name] FROM (SELECT TOP (@p1) [name] FROM [dbo].[snap_greek] WHERE [name] >= CAST(@p2 COLLATE Greek_CI_AS AS varchar(20)) ORDER BY [name]) AS [q0]
) AS [s] ORDER BY [s].[name] OFFSET @p3 ROWS FETCH NEXT 1 ROWS ONLY;

-- name: nullable/from_null
-- @p1 = bigint 101
-- @p2 = bigint 5
-- @p3 = bigint 100
SELECT [s].[a], [s].[b] FROM (
SELECT [q0].[a], [q0].[b] FROM (SELECT TOP (@p1) [a], [b] FROM [dbo].[nk] WHERE [a] IS NULL AND [b] >= CAST(@p2 AS int) ORDER BY [a], [b]) AS [q0]
UNION ALL
SELECT [q1].[a], [q1].[b] FROM (SELECT TOP (@p1) [a], [b] FROM [dbo].[nk] WHERE [a] IS NOT NULL ORDER BY [a], [b]) AS [q1]
) AS [s] ORDER BY [s].[a], [s].[b] OFFSET @p3 ROWS FETCH NEXT 1 ROWS ONLY;

-- name: weird_names/from_key
-- @p1 = bigint 3
-- @p2 = bigint 1
-- @p3 = nvarchar N'жж'
-- @p4 = bigint 2
SELECT [s].[id ]]]]], [s].[ключ] FROM (
SELECT [q0].[id ]]]]], [q0].[ключ] FROM (SELECT TOP (@p1) [id ]]]]], [ключ] FROM [sales ]]x].[Ördersё 'q"] WHERE [id ]]]]] = CAST(@p2 AS int) AND [ключ] >= CAST(@p3 AS nchar(4)) ORDER BY [id ]]]]], [ключ]) AS [q0]
UNION ALL
SELECT [q1].[id ]]]]], [q1].[ключ] FROM (SELECT TOP (@p1) [id ]]]]], [ключ] FROM [sales ]]x].[Ördersё 'q"] WHERE [id ]]]]] > CAST(@p2 AS int) ORDER BY [id ]]]]], [ключ]) AS [q1]
) AS [s] ORDER BY [s].[id ]]]]], [s].[ключ] OFFSET @p4 ROWS FETCH NEXT 1 ROWS ONLY;

-- name: utf8/from_key
-- @p1 = bigint 101
-- @p2 = nvarchar N'Kraków'
-- @p3 = bigint 100
SELECT CAST([s].[name] AS nvarchar(40)) AS [name] FROM (
SELECT [q0].[name] FROM (SELECT TOP (@p1) [name] FROM [dbo].[cities] WHERE [name] >= CAST(@p2 COLLATE Latin1_General_100_CI_AS_SC_UTF8 AS varchar(40)) ORDER BY [name]) AS [q0]
) AS [s] ORDER BY [s].[name] OFFSET @p3 ROWS FETCH NEXT 1 ROWS ONLY;

-- name: identity/from_key
-- @p1 = bigint 101
-- @p2 = bigint 10
-- @p3 = bigint 100
SELECT CAST([s].[id] AS bigint) AS [id] FROM (
SELECT [q0].[id] FROM (SELECT TOP (@p1) [id] FROM [dbo].[ddl] WHERE [id] >= CAST(@p2 AS bigint) ORDER BY [id]) AS [q0]
) AS [s] ORDER BY [s].[id] OFFSET @p3 ROWS FETCH NEXT 1 ROWS ONLY;

-- name: kinds/from_key
-- @p1 = bigint 51
-- @p2 = nvarchar N'-12.345'
-- @p3 = nvarchar N'922337203685477.5807'
-- @p4 = float 1.5
-- @p5 = float 0.10000000149011612
-- @p6 = datetime2(7) (civil.DateTime) 2024-02-29T10:00:00.123000000
-- @p7 = date (civil.Date) 2024-02-29
-- @p8 = time(7) (civil.Time) 23:59:59.999999900
-- @p9 = datetimeoffset(7) (mssql.DateTimeOffset) 2024-02-29T10:00:00.0000001-03:00
-- @p10 = varbinary 0xDEADBEEF000000000000000000000001
-- @p11 = bit true
-- @p12 = datetime2(7) (civil.DateTime) 2024-02-29T10:01:00
-- @p13 = datetime2(7) (civil.DateTime) 2024-02-29T10:00:00.003000000
-- @p14 = bigint 50
SELECT [s].[d], [s].[m], [s].[f], [s].[r], [s].[dt], [s].[day], [s].[tod], [s].[dto], [s].[bin], [s].[bit], [s].[sdt], [s].[dtm] FROM (
SELECT [q0].[d], [q0].[m], [q0].[f], [q0].[r], [q0].[dt], [q0].[day], [q0].[tod], [q0].[dto], [q0].[bin], [q0].[bit], [q0].[sdt], [q0].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] = CAST(@p2 AS numeric(10,3)) AND [m] = CAST(@p3 AS money) AND [f] = CAST(@p4 AS float) AND [r] = CAST(@p5 AS real) AND [dt] = CAST(@p6 AS datetime2(3)) AND [day] = CAST(@p7 AS date) AND [tod] = CAST(@p8 AS time(7)) AND [dto] = CAST(@p9 AS datetimeoffset(7)) AND [bin] = CAST(@p10 AS binary(16)) AND [bit] = CAST(@p11 AS bit) AND [sdt] = CAST(@p12 AS smalldatetime) AND [dtm] >= CAST(@p13 AS datetime) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q0]
UNION ALL
SELECT [q1].[d], [q1].[m], [q1].[f], [q1].[r], [q1].[dt], [q1].[day], [q1].[tod], [q1].[dto], [q1].[bin], [q1].[bit], [q1].[sdt], [q1].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] = CAST(@p2 AS numeric(10,3)) AND [m] = CAST(@p3 AS money) AND [f] = CAST(@p4 AS float) AND [r] = CAST(@p5 AS real) AND [dt] = CAST(@p6 AS datetime2(3)) AND [day] = CAST(@p7 AS date) AND [tod] = CAST(@p8 AS time(7)) AND [dto] = CAST(@p9 AS datetimeoffset(7)) AND [bin] = CAST(@p10 AS binary(16)) AND [bit] = CAST(@p11 AS bit) AND [sdt] > CAST(@p12 AS smalldatetime) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q1]
UNION ALL
SELECT [q2].[d], [q2].[m], [q2].[f], [q2].[r], [q2].[dt], [q2].[day], [q2].[tod], [q2].[dto], [q2].[bin], [q2].[bit], [q2].[sdt], [q2].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] = CAST(@p2 AS numeric(10,3)) AND [m] = CAST(@p3 AS money) AND [f] = CAST(@p4 AS float) AND [r] = CAST(@p5 AS real) AND [dt] = CAST(@p6 AS datetime2(3)) AND [day] = CAST(@p7 AS date) AND [tod] = CAST(@p8 AS time(7)) AND [dto] = CAST(@p9 AS datetimeoffset(7)) AND [bin] = CAST(@p10 AS binary(16)) AND [bit] > CAST(@p11 AS bit) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q2]
UNION ALL
SELECT [q3].[d], [q3].[m], [q3].[f], [q3].[r], [q3].[dt], [q3].[day], [q3].[tod], [q3].[dto], [q3].[bin], [q3].[bit], [q3].[sdt], [q3].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] = CAST(@p2 AS numeric(10,3)) AND [m] = CAST(@p3 AS money) AND [f] = CAST(@p4 AS float) AND [r] = CAST(@p5 AS real) AND [dt] = CAST(@p6 AS datetime2(3)) AND [day] = CAST(@p7 AS date) AND [tod] = CAST(@p8 AS time(7)) AND [dto] = CAST(@p9 AS datetimeoffset(7)) AND [bin] > CAST(@p10 AS binary(16)) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q3]
UNION ALL
SELECT [q4].[d], [q4].[m], [q4].[f], [q4].[r], [q4].[dt], [q4].[day], [q4].[tod], [q4].[dto], [q4].[bin], [q4].[bit], [q4].[sdt], [q4].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] = CAST(@p2 AS numeric(10,3)) AND [m] = CAST(@p3 AS money) AND [f] = CAST(@p4 AS float) AND [r] = CAST(@p5 AS real) AND [dt] = CAST(@p6 AS datetime2(3)) AND [day] = CAST(@p7 AS date) AND [tod] = CAST(@p8 AS time(7)) AND [dto] > CAST(@p9 AS datetimeoffset(7)) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q4]
UNION ALL
SELECT [q5].[d], [q5].[m], [q5].[f], [q5].[r], [q5].[dt], [q5].[day], [q5].[tod], [q5].[dto], [q5].[bin], [q5].[bit], [q5].[sdt], [q5].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] = CAST(@p2 AS numeric(10,3)) AND [m] = CAST(@p3 AS money) AND [f] = CAST(@p4 AS float) AND [r] = CAST(@p5 AS real) AND [dt] = CAST(@p6 AS datetime2(3)) AND [day] = CAST(@p7 AS date) AND [tod] > CAST(@p8 AS time(7)) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q5]
UNION ALL
SELECT [q6].[d], [q6].[m], [q6].[f], [q6].[r], [q6].[dt], [q6].[day], [q6].[tod], [q6].[dto], [q6].[bin], [q6].[bit], [q6].[sdt], [q6].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] = CAST(@p2 AS numeric(10,3)) AND [m] = CAST(@p3 AS money) AND [f] = CAST(@p4 AS float) AND [r] = CAST(@p5 AS real) AND [dt] = CAST(@p6 AS datetime2(3)) AND [day] > CAST(@p7 AS date) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q6]
UNION ALL
SELECT [q7].[d], [q7].[m], [q7].[f], [q7].[r], [q7].[dt], [q7].[day], [q7].[tod], [q7].[dto], [q7].[bin], [q7].[bit], [q7].[sdt], [q7].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] = CAST(@p2 AS numeric(10,3)) AND [m] = CAST(@p3 AS money) AND [f] = CAST(@p4 AS float) AND [r] = CAST(@p5 AS real) AND [dt] > CAST(@p6 AS datetime2(3)) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q7]
UNION ALL
SELECT [q8].[d], [q8].[m], [q8].[f], [q8].[r], [q8].[dt], [q8].[day], [q8].[tod], [q8].[dto], [q8].[bin], [q8].[bit], [q8].[sdt], [q8].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] = CAST(@p2 AS numeric(10,3)) AND [m] = CAST(@p3 AS money) AND [f] = CAST(@p4 AS float) AND [r] > CAST(@p5 AS real) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q8]
UNION ALL
SELECT [q9].[d], [q9].[m], [q9].[f], [q9].[r], [q9].[dt], [q9].[day], [q9].[tod], [q9].[dto], [q9].[bin], [q9].[bit], [q9].[sdt], [q9].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] = CAST(@p2 AS numeric(10,3)) AND [m] = CAST(@p3 AS money) AND [f] > CAST(@p4 AS float) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q9]
UNION ALL
SELECT [q10].[d], [q10].[m], [q10].[f], [q10].[r], [q10].[dt], [q10].[day], [q10].[tod], [q10].[dto], [q10].[bin], [q10].[bit], [q10].[sdt], [q10].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] = CAST(@p2 AS numeric(10,3)) AND [m] > CAST(@p3 AS money) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q10]
UNION ALL
SELECT [q11].[d], [q11].[m], [q11].[f], [q11].[r], [q11].[dt], [q11].[day], [q11].[tod], [q11].[dto], [q11].[bin], [q11].[bit], [q11].[sdt], [q11].[dtm] FROM (SELECT TOP (@p1) [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm] FROM [dbo].[kinds] WHERE [d] > CAST(@p2 AS numeric(10,3)) ORDER BY [d], [m], [f], [r], [dt], [day], [tod], [dto], [bin], [bit], [sdt], [dtm]) AS [q11]
) AS [s] ORDER BY [s].[d], [s].[m], [s].[f], [s].[r], [s].[dt], [s].[day], [s].[tod], [s].[dto], [s].[bin], [s].[bit], [s].[sdt], [s].[dtm] OFFSET @p14 ROWS FETCH NEXT 1 ROWS ONLY;

-- name: split_nullable/from_start
-- @p1 = bigint 1001
-- @p2 = bigint 1000
-- @p3 = bigint 1
SELECT [n].[b] FROM (SELECT [s].[b] FROM (
SELECT [q0].[b] FROM (SELECT TOP (@p1) [b] FROM [dbo].[nk] ORDER BY [b]) AS [q0]
) AS [s] ORDER BY [s].[b] OFFSET @p2 ROWS FETCH NEXT 1 ROWS ONLY) AS [v]
CROSS APPLY (SELECT TOP (@p3) [t].[b] FROM [dbo].[nk] AS [t] WHERE [t].[b] IS NOT NULL AND ([v].[b] IS NULL OR [t].[b] >= [v].[b]) ORDER BY [t].[b]) AS [n];

-- name: split_nullable/from_null
-- @p1 = bigint 1001
-- @p2 = bigint 1000
-- @p3 = bigint 1
SELECT [n].[b] FROM (SELECT [s].[b] FROM (
SELECT [q0].[b] FROM (SELECT TOP (@p1) [b] FROM [dbo].[nk] ORDER BY [b]) AS [q0]
) AS [s] ORDER BY [s].[b] OFFSET @p2 ROWS FETCH NEXT 1 ROWS ONLY) AS [v]
CROSS APPLY (SELECT TOP (@p3) [t].[b] FROM [dbo].[nk] AS [t] WHERE [t].[b] IS NOT NULL AND ([v].[b] IS NULL OR [t].[b] >= [v].[b]) ORDER BY [t].[b]) AS [n];

-- name: split_nullable/from_key
-- @p1 = bigint 1001
-- @p2 = bigint 40
-- @p3 = bigint 1000
-- @p4 = bigint 1
SELECT [n].[b] FROM (SELECT [s].[b] FROM (
SELECT [q0].[b] FROM (SELECT TOP (@p1) [b] FROM [dbo].[nk] WHERE [b] >= CAST(@p2 AS int) ORDER BY [b]) AS [q0]
) AS [s] ORDER BY [s].[b] OFFSET @p3 ROWS FETCH NEXT 1 ROWS ONLY) AS [v]
CROSS APPLY (SELECT TOP (@p4) [t].[b] FROM [dbo].[nk] AS [t] WHERE [t].[b] > CAST(@p2 AS int) AND ([v].[b] IS NULL OR [t].[b] >= [v].[b]) ORDER BY [t].[b]) AS [n];

-- name: split_greek/from_key
-- @p1 = bigint 4
-- @p2 = nvarchar N'Δέλτα'
-- @p3 = bigint 3
-- @p4 = bigint 1
SELECT CAST([n].[name] AS nvarchar(20)) AS [name] FROM (SELECT [s].[name] FROM (
SELECT [q0].[name] FROM (SELECT TOP (@p1) [name] FROM [dbo].[snap_greek] WHERE [name] >= CAST(@p2 COLLATE Greek_CI_AS AS varchar(20)) ORDER BY [name]) AS [q0]
) AS [s] ORDER BY [s].[name] OFFSET @p3 ROWS FETCH NEXT 1 ROWS ONLY) AS [v]
CROSS APPLY (SELECT TOP (@p4) [t].[name] FROM [dbo].[snap_greek] AS [t] WHERE [t].[name] > CAST(@p2 COLLATE Greek_CI_AS AS varchar(20)) AND [t].[name] >= [v].[name] ORDER BY [t].[name]) AS [n];

-- name: split_utf8/from_key
-- @p1 = bigint 101
-- @p2 = nvarchar N'Kraków'
-- @p3 = bigint 100
-- @p4 = bigint 1
SELECT CAST([n].[name] AS nvarchar(40)) AS [name] FROM (SELECT [s].[name] FROM (
SELECT [q0].[name] FROM (SELECT TOP (@p1) [name] FROM [dbo].[cities] WHERE [name] >= CAST(@p2 COLLATE Latin1_General_100_CI_AS_SC_UTF8 AS varchar(40)) ORDER BY [name]) AS [q0]
) AS [s] ORDER BY [s].[name] OFFSET @p3 ROWS FETCH NEXT 1 ROWS ONLY) AS [v]
CROSS APPLY (SELECT TOP (@p4) [t].[name] FROM [dbo].[cities] AS [t] WHERE [t].[name] > CAST(@p2 COLLATE Latin1_General_100_CI_AS_SC_UTF8 AS varchar(40)) AND [t].[name] >= [v].[name] ORDER BY [t].[name]) AS [n];

